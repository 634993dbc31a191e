from python_backends.chat.text_stream import StopTextStream


def test_multibyte_characters_split_across_tokens_are_emitted_whole() -> None:
    stream = StopTextStream()
    euro = "€".encode()
    assert stream.push(euro[:1]) == ""
    assert stream.push(euro[1:]) == "€"
    assert stream.push(b" ok") == " ok"
    assert stream.flush() == ""


def test_stop_string_spanning_tokens_is_never_emitted() -> None:
    stream = StopTextStream(["\nUser:"])
    emitted = [stream.push(piece) for piece in (b"Hello", b"\nUs", b"er:", b" more")]
    assert "".join(emitted) == "Hello"
    assert stream.stopped
    assert stream.flush() == ""


def test_partial_stop_prefix_is_released_when_it_does_not_complete() -> None:
    stream = StopTextStream(["STOP"])
    assert stream.push(b"a ST") == "a "
    assert stream.push(b"ART") == "START"
    assert not stream.stopped


def test_held_back_text_is_flushed_at_the_end() -> None:
    stream = StopTextStream(["END"])
    assert stream.push(b"the EN") == "the "
    assert stream.flush() == "EN"


def test_earliest_of_several_stop_strings_wins() -> None:
    stream = StopTextStream(["b", "a"])
    assert stream.push(b"xxab") == "xx"

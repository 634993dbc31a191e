"""Everything that talks to the workers, behind one protocol (``protocol.Transport``).

``protocol`` is the seam (types and the ``Transport`` protocol); ``triton`` is the implementation
over real ``tritonserver`` workers. Nothing outside this package imports ``tritonclient`` except
the KServe codec, which reuses its byte-tensor helpers.
"""

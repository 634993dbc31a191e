"""Train the ``tabular`` model: a small MLP on scikit-learn's digits, exported to ONNX.

Deterministic (fixed seed, fixed split). Writes ``model.onnx`` (input ``features`` float32
[N, 64] with pixel intensities 0..16, output ``probabilities`` float32 [N, 10]) and
``metrics.json`` with the held-out accuracy; refuses to export a model under 90 % accuracy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

FEATURES = 64
CLASSES = 10
MIN_ACCURACY = 0.90


def train_and_export_tabular(out_dir: Path, seed: int = 7) -> float:
    """Train, verify and export; return the held-out accuracy."""
    import torch
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = digits.data.astype(np.float32)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.2, random_state=seed, stratify=y
    )
    torch.manual_seed(seed)
    net = torch.nn.Sequential(
        torch.nn.Linear(FEATURES, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, CLASSES),
    )
    scale = 1.0 / 16.0
    optimizer = torch.optim.Adam(net.parameters(), lr=3e-3)
    inputs, targets = torch.from_numpy(x_train * scale), torch.from_numpy(y_train)
    for _ in range(300):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(inputs), targets)
        loss.backward()
        optimizer.step()

    model = torch.nn.Sequential(_scale_layer(scale), net, torch.nn.Softmax(dim=1)).eval()
    with torch.no_grad():
        predicted = model(torch.from_numpy(x_test)).argmax(dim=1).numpy()
    accuracy = float((predicted == y_test).mean())
    if accuracy < MIN_ACCURACY:
        raise RuntimeError(f"tabular MLP reached only {accuracy:.3f} held-out accuracy")
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(
        model, (torch.from_numpy(x_test[:2]),), str(out_dir / "model.onnx"),
        input_names=["features"], output_names=["probabilities"],
        dynamic_axes={"features": {0: "batch"}, "probabilities": {0: "batch"}},
        opset_version=17, dynamo=False,
    )
    (out_dir / "metrics.json").write_text(
        json.dumps({"dataset": "sklearn.datasets.load_digits", "test_accuracy": accuracy})
    )
    return accuracy


def _scale_layer(factor: float) -> Any:
    """A module multiplying its input by ``factor`` (pixel intensities 0..16 to 0..1)."""
    import torch

    class Scale(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * factor

    return Scale()

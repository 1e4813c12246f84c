"""The "Add example inputs" scaffold reads its shapes from the layers __init__ builds (issue 26).

Each test runs what the scaffold writes: the module is built from get_init_inputs() and called
on get_inputs(), as capture would; a wrong shape fails there.
"""

from __future__ import annotations

import pytest
import torch
from kernelstitch.server.scaffold import build_scaffold

pytestmark = pytest.mark.timeout(60)


def _run(source: str, name: str = "Model"):
    scaffold = build_scaffold(source, name)
    assert scaffold is not None
    namespace: dict = {}
    exec(compile(source + "\n\n\n" + scaffold.text + "\n", "m.py", "exec"), namespace)  # noqa: S102
    suffix = "" if name == "Model" else f"_{name}"
    init = namespace.get(f"get_init_inputs{suffix}", lambda: [])()
    inputs = namespace[f"get_inputs{suffix}"]()
    with torch.no_grad():
        namespace[name](*init)(*inputs)  # raises on a shape the layers do not take
    return scaffold.text, inputs


def test_linear_of_the_issue_gets_its_in_features():
    source = (
        "import torch\nfrom torch import nn\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(64, 64)\n"
        "    def forward(self, x):\n"
        "        return torch.relu(self.fc(x))\n"
    )
    text, (x,) = _run(source)
    assert "torch.randn(batch, 64),  # x: what self.fc (nn.Linear(64, 64)) takes" in text
    assert "    batch = 16\n" in text
    assert tuple(x.shape) == (16, 64)


def test_constructor_parameters_and_module_constants_size_the_layers():
    source = (
        "import torch\nimport torch.nn as nn\n\n"
        "hidden = 24\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self, channels: int, groups=4):\n"
        "        super().__init__()\n"
        "        self.conv = nn.Conv2d(in_channels=channels * 2, out_channels=hidden, kernel_size=3)\n"
        "        self.norm = nn.GroupNorm(groups, hidden)\n"
        "        self.bn = nn.BatchNorm1d(num_features=hidden + 8)\n"
        "    def forward(self, image, features):\n"
        "        image = image.float()\n"
        "        return self.norm(self.conv(image)), self.bn(features)\n"
    )
    text, (image, features) = _run(source, "Net")
    # channels gets the scaffold's placeholder 16, so the conv takes 32 channels.
    assert "16,  # channels" in text and "4,  # groups (default)" in text
    assert tuple(image.shape) == (16, 32, 32, 32)
    assert tuple(features.shape) == (16, 32)


def test_an_existing_literal_get_init_inputs_gives_the_parameter_values():
    # KernelBench's layout: module constants, get_init_inputs already written, no get_inputs.
    source = (
        "import torch\nimport torch.nn as nn\n\n"
        "batch_size = 128\nin_features = 48\nout_features = 10\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self, in_features, out_features):\n"
        "        super().__init__()\n"
        "        self.net = nn.Sequential(nn.Linear(in_features, 96), nn.ReLU(),\n"
        "                                 nn.Linear(96, out_features))\n"
        "    def forward(self, x):\n"
        "        return self.net(x)\n\n"
        "def get_init_inputs():\n"
        "    return [in_features, out_features]\n"
    )
    text, (x,) = _run(source)
    assert "def get_init_inputs" not in text  # the user's one stays the only one
    assert tuple(x.shape) == (16, 48)


def test_embedding_recurrent_and_layer_norm_inputs():
    source = (
        "import torch\nfrom torch import nn\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self, vocab=500, dim=12):\n"
        "        super().__init__()\n"
        "        self.emb = nn.Embedding(vocab, dim)\n"
        "        self.rnn = nn.LSTM(dim, 20, batch_first=True)\n"
        "        self.gru = nn.GRU(input_size=6, hidden_size=5)\n"
        "        self.ln = nn.LayerNorm([dim, 3])\n"
        "    def forward(self, tokens, seq, timeline, grid):\n"
        "        return self.emb(tokens), self.rnn(seq), self.gru(timeline), self.ln(grid)\n"
    )
    text, (tokens, seq, timeline, grid) = _run(source)
    assert "torch.randint(0, 500, (batch, 32))" in text
    assert tokens.dtype == torch.int64 and int(tokens.max()) < 500
    assert tuple(seq.shape) == (16, 32, 12)  # batch_first
    assert tuple(timeline.shape) == (32, 16, 6)  # sequence first
    assert tuple(grid.shape) == (16, 12, 3)


def test_conv_variants_and_a_torch_alias():
    source = (
        "import torch as T\nfrom torch.nn import Conv1d, ConvTranspose3d\nimport torch.nn as nn\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.c1 = Conv1d(5, 7, 3)\n"
        "        self.c3 = ConvTranspose3d(3, 2, kernel_size=2)\n"
        "    def forward(self, signal, volume):\n"
        "        return self.c1(signal), self.c3(volume)\n"
    )
    text, (signal, volume) = _run(source)
    assert "T.randn(batch, 5, 32)" in text and "import torch\n" not in text
    assert tuple(signal.shape) == (16, 5, 32) and tuple(volume.shape) == (16, 3, 16, 16, 16)


def test_unknown_shapes_keep_the_placeholder():
    source = (
        "import torch\nfrom torch import nn\n\n"
        "def width():\n    return 64\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self, sizes):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(width(), 8)\n"  # not a constant: unknown
        "        self.fc2 = nn.Linear(sizes[0], 8)\n"
        "        self.fc3 = nn.Linear(64, 8)\n"
        "    def forward(self, a, b, c):\n"
        "        c = c.view(-1, 64)\n"  # reshaped before the layer: its shape is not the layer's
        "        return self.fc(a), self.fc2(b), self.fc3(c)\n"
    )
    text = build_scaffold(source, "Model").text
    for name in "abc":
        assert f"torch.randn(batch, 16),  # {name}: placeholder shape" in text


def test_a_computed_get_init_inputs_makes_the_parameters_unknown():
    source = (
        "import torch\nfrom torch import nn\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self, n):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(n, 4)\n"
        "    def forward(self, x):\n"
        "        return self.fc(x)\n\n"
        "def get_init_inputs():\n"
        "    sizes = [3, 4]\n"
        "    return sizes[:1]\n"
    )
    text = build_scaffold(source, "Model").text
    assert "x: placeholder shape" in text


def test_a_module_reassigned_after_a_reshape_is_not_followed():
    source = (
        "import torch\nfrom torch import nn\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(64, 4)\n"
        "    def forward(self, x):\n"
        "        x = torch.flatten(x, 1)\n"
        "        return self.fc(x)\n"
    )
    assert "x: placeholder shape" in build_scaffold(source, "Model").text

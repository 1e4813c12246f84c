"""KernelStitch: turns PyTorch modules into verified, fused CUDA.

Importing this package is cheap and never imports torch: the language server imports it on
start-up, and only worker processes load torch and user code.
"""

__version__ = "0.1.0"

"""Test-wide settings."""

import torch

# Tiny models trained to zero loss produce subnormal floats, which are ~10x slower on x86 CPUs.
torch.set_flush_denormal(True)
torch.set_num_threads(1)  # tiny tensors: threading only adds overhead (and CI has 2 cores)

# One line for the benchmark headers: the PyTorch peer's version and the BLAS it runs with.
# Debian's PyTorch calls whatever libblas.so.3 the alternatives system points at: the reference
# BLAS (slow) unless OpenBLAS is installed, so the tables say which one this process mapped.
import os

import torch

a = torch.randn(64, 64)
(a @ a).sum()  # make sure the BLAS is loaded
blas = set()
with open("/proc/self/maps") as maps:
    for line in maps:
        path = line.split()[-1]
        name = os.path.basename(path)
        if name.startswith(("libblas", "libopenblas", "libmkl")):
            blas.add(os.path.basename(os.path.dirname(path)) + "/" + name)
onednn = "oneDNN" if torch.backends.mkldnn.is_available() else "no oneDNN"
print(f"PyTorch {torch.__version__}, BLAS {', '.join(sorted(blas)) or 'none mapped'}, {onednn}")

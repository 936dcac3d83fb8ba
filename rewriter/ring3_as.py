#!/usr/bin/env python3
"""ring3-as: a drop-in GNU as for 32-bit code that rewrites sensitive instructions.

gcc finds it as `as` through `gcc -B build/asbin/`. See rewriter/ring3as/main.py.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ring3as.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

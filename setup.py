"""Installation script for paddle_llrd.

Paddle itself is an *extra*, never a hard requirement: a user who already has
``paddlepaddle-gpu`` must not get the CPU wheel installed on top of it.

    pip install -e .[cpu,test]     # CPU development
    pip install -e .               # on a CUDA machine, after paddlepaddle-gpu

There is no ``gpu`` extra: PyPI's paddlepaddle-gpu stops at 2.6.2, so Paddle 3
GPU builds are installed first from Paddle's own package index, one per CUDA
version (README.md, "GPU").
"""
from setuptools import find_packages, setup

with open("README.md", encoding="utf-8") as readme:
    long_description = readme.read()

setup(
    name="paddle_llrd",
    version="0.1.0",
    description=(
        "AdamW with layer-wise learning-rate decay, warmup schedulers, a "
        "scheduler registry and weight EMA for PaddlePaddle 3 "
        "(a working drop-in for paddlenlp.ops.optimizer)"
    ),
    long_description=long_description,
    long_description_content_type="text/markdown",
    packages=find_packages(include=["paddle_llrd", "paddle_llrd.*"]),
    # The fused operator's C++ sources: built at first use (or by `python -m paddle_llrd
    # build-operator`) with paddle.utils.cpp_extension, for the Paddle installed beside it.
    package_data={"paddle_llrd.optim": ["csrc/*.cc", "csrc/*.h"]},
    python_requires=">=3.9",
    install_requires=["numpy"],
    extras_require={
        "cpu": ["paddlepaddle>=3.0"],  # the oldest tested: requirements-paddle-oldest.txt
        "test": ["pytest", "hypothesis"],
        "plot": ["matplotlib"],
        "demo": ["tqdm", "matplotlib", "scikit-learn"],
        # The docs' theme, copy buttons and offline MathJax, and the browser
        # driver of `make docs-check` (it drives Debian's chromium), pinned as
        # in requirements-dev.txt.
        "docs": [
            "sphinx==7.4.7",
            "furo==2025.12.19",
            "sphinx-copybutton==0.5.2",
            "sphinx-mathjax-offline==0.0.2",
            "playwright==1.65.2",
        ],
        # paddle_llrd.integrations.paddlenlp: PaddleNLP 2.8.1 runs beside
        # Paddle 3 only with these pins (see requirements-paddlenlp.txt).
        "paddlenlp": [
            "paddlenlp==2.8.1",
            "huggingface_hub<0.26",
            "aistudio-sdk==0.1.7",
            "datasets<3",
            "pyarrow<17",
        ],
        # paddle_llrd.integrations.paddleformers: PaddleFormers 1.2.0 needs
        # numpy<=1.26.4, which pyarrow 26 refuses (see requirements-paddleformers.txt).
        "paddleformers": [
            "paddleformers==1.2.0",
            "numpy<=1.26.4",
            "pyarrow<26",
        ],
    },
    entry_points={"console_scripts": ["paddle-llrd=paddle_llrd.cli:main"]},
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)

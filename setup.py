"""Build hook for the optional C accelerator; all metadata lives in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "gateway.core._recordstream",
            ["gateway/core/_recordstream.c"],
            extra_compile_args=["-O3", "-std=gnu11"],
            optional=True,  # without a compiler, gateway.core.records falls back to Python
        ),
        Extension(
            "gateway.node._wire",
            ["gateway/node/_wire.c"],
            extra_compile_args=["-O3", "-std=gnu11"],
            optional=True,  # without a compiler, gateway.node.state_machine uses Python
        ),
    ]
)

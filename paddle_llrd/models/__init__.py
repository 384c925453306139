"""Small bundled models and data the demo, the docs, the CLI and the tests
build on: a tiny BERT, a tiny ViT, name skeletons of common families and a
synthetic task. Nothing is downloaded.
"""

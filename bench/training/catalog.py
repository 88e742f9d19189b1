"""The built-in backbones and optimisers, declared by name without importing torch: the
configuration checks a run's ``backbone`` and ``optimizer`` against these names (``bench
config`` among its users), and the module that builds one is imported when a run first does
(:meth:`~debias_bench.registry.Registry.declare`). A plugin registers its own with
``register_backbone`` and ``register_optimizer``."""

from __future__ import annotations

from debias_bench.registry import BACKBONES, OPTIMIZERS

#: each backbone's builder (from the dataset's spec and the run's engine hyperparameters) is
#: ``build_<name>`` of ``debias_bench.training.backbones``
for _name in (
    "mlp",
    "resnet20",
    "resnet20_kaiming",
    "resnet18",
    "resnet18_pretrained",
    "resnet18_etf",
):
    BACKBONES.declare(_name, f"debias_bench.training.backbones:build_{_name}", display_name=_name)

#: the optimisers ``optimizer`` (and a method's own optimiser keys) may name
for _name, _cls in (("adam", "Adam"), ("adamw", "AdamW"), ("sgd", "SGD")):
    OPTIMIZERS.declare(_name, f"torch.optim:{_cls}", display_name=_cls)

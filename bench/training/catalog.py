"""The built-in backbones and optimisers, declared by name without importing torch: the
configuration checks a run's ``backbone`` and ``optimizer`` against these names (``bench
config`` among its users), and the module that builds one is imported when a run first does
(:meth:`~debias_bench.registry.Registry.declare`). A plugin registers its own with
``register_backbone`` and ``register_optimizer``."""

from __future__ import annotations

from debias_bench.registry import BACKBONES, OPTIMIZERS

#: each backbone's builder (from the dataset's spec and the run's engine hyperparameters) is
#: ``build_<name>`` of ``debias_bench.training.backbones``
#: ``weights``: where the backbone's pretrained weights are found (``module:function`` taking
#: the run's ``pretrained_weights``, raising DataNotFoundError), checked before a sweep starts
#: (``debias_bench.launchers.preflight.check_weights``)
_RESNET18_WEIGHTS = "debias_bench.training.backbones:imagenet_resnet18_weights"
for _name, _weights in (
    ("mlp", None),
    ("resnet20", None),
    ("resnet20_kaiming", None),
    ("resnet18", None),
    ("resnet18_pretrained", _RESNET18_WEIGHTS),
    ("resnet18_etf", _RESNET18_WEIGHTS),
):
    BACKBONES.declare(
        _name,
        f"debias_bench.training.backbones:build_{_name}",
        display_name=_name,
        **({"weights": _weights} if _weights else {}),
    )

#: the optimisers ``optimizer`` (and a method's own optimiser keys) may name
for _name, _cls in (("adam", "Adam"), ("adamw", "AdamW"), ("sgd", "SGD")):
    OPTIMIZERS.declare(_name, f"torch.optim:{_cls}", display_name=_cls)

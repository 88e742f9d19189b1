"""Training: the engine, the method interface, optimisers, backbones, acceleration, metrics, Neural
Collapse, CAM."""

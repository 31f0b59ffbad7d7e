"""Ansible's linear strategy run through Mitogen (the `mitogen` package of the deployment
venv, scripts/deploy-requirements.txt).

Mitogen keeps one Python interpreter per host for the whole run instead of uploading and
starting a module per task, which cut the Molecule cluster scenario's no-change converge
from 170 s to 59 s (docs/distribution.md). This file only makes the strategy findable by
a path inside the repository (ansible.cfg, molecule.yml), whatever the venv's Python
version. `ANSIBLE_STRATEGY=linear` runs a playbook without it.
"""

from ansible_mitogen.plugins.strategy.mitogen_linear import StrategyModule

__all__ = ["StrategyModule"]

"""Rules in the Prometheus JMX exporter's YAML format, applied to MBean attributes.

The JMX exporter turns each numeric attribute of an MBean into the text

    <domain><<key>=<value>, <key>=<value>, ...><><Attribute>: <value>

(keys in the MBean name's order) and gives it to the rules in order; the first rule whose
`pattern` (a regular expression, anchored at both ends) matches names the sample: `name`
and `labels` may use `$1`, `$2`, ... from the pattern's groups; `type` is GAUGE, COUNTER
or UNTYPED; `valueFactor` scales the value; `help` describes it. `lowercaseOutputName`
and `lowercaseOutputLabelNames` (top level) lowercase names and label names. A sample no
rule matches is dropped (as with a rule list that has no catch-all). Names are made
Prometheus-safe the exporter's way: characters outside [a-zA-Z0-9:_] become `_` and runs
of `_` collapse.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import yaml

TYPES = ("GAUGE", "COUNTER", "UNTYPED")
_UNSAFE = re.compile(r"[^a-zA-Z0-9:_]")
_UNDERSCORES = re.compile(r"__+")
_GROUP = re.compile(r"\$(\d+)")


class RuleError(ValueError):
    """A rule file the exporter cannot use (the message names the rule)."""


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]
    name: str
    type: str = "UNTYPED"
    help: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    value_factor: float = 1.0


@dataclass(frozen=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float
    type: str
    help: str


@dataclass
class RuleSet:
    rules: list[Rule]
    lowercase_names: bool = False
    lowercase_label_names: bool = False

    @classmethod
    def from_yaml(cls, text: str) -> RuleSet:
        config = yaml.safe_load(text) or {}
        if not isinstance(config, dict):
            raise RuleError("the rule file must be a mapping with a 'rules' list")
        rules = []
        for i, raw in enumerate(config.get("rules") or []):
            if not isinstance(raw, dict) or "pattern" not in raw or "name" not in raw:
                raise RuleError(f"rule {i + 1}: needs a pattern and a name")
            kind = str(raw.get("type", "UNTYPED")).upper()
            if kind not in TYPES:
                raise RuleError(f"rule {i + 1}: type {kind} is not one of {', '.join(TYPES)}")
            try:
                pattern = re.compile(str(raw["pattern"]))
            except re.error as exc:
                raise RuleError(f"rule {i + 1}: bad pattern {raw['pattern']!r}: {exc}") from None
            rules.append(Rule(pattern, str(raw["name"]), kind, str(raw.get("help", "")),
                              {str(k): str(v) for k, v in (raw.get("labels") or {}).items()},
                              float(raw.get("valueFactor", 1.0))))
        return cls(rules, bool(config.get("lowercaseOutputName", False)),
                   bool(config.get("lowercaseOutputLabelNames", False)))

    def apply(self, mbean: str, attributes: Mapping[str, object]) -> list[Sample]:
        """The samples of one MBean's numeric attributes."""
        domain, _, properties = mbean.partition(":")
        keys = ", ".join(p for p in properties.split(",") if p)
        samples = []
        for attribute, value in attributes.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            text = f"{domain}<{keys}><>{attribute}"
            for rule in self.rules:
                match = rule.pattern.fullmatch(text)
                if match is not None:
                    samples.append(self._sample(rule, match, float(value)))
                    break
        return samples

    def _sample(self, rule: Rule, match: re.Match[str], value: float) -> Sample:
        def expand(template: str) -> str:
            return _GROUP.sub(lambda m: match.group(int(m.group(1))) or "", template)

        name = _safe(expand(rule.name))
        if self.lowercase_names:
            name = name.lower()
        labels = []
        for key, template in rule.labels.items():
            label = _safe(expand(key))
            if self.lowercase_label_names:
                label = label.lower()
            labels.append((label, expand(template)))
        return Sample(name, tuple(labels), value * rule.value_factor, rule.type,
                      expand(rule.help))


def _safe(name: str) -> str:
    return _UNDERSCORES.sub("_", _UNSAFE.sub("_", name))

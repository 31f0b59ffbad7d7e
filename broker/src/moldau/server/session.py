"""Who is on the other end of a connection: what the authorizer and quotas look at."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Session:
    """Who is on the other end: what the authorizer and quotas look at."""

    principal: str = "User:ANONYMOUS"
    client_address: str = ""
    acl_host: str = ""  # the client's IP as Java prints it: what ACL hosts are compared with
    listener: str = ""
    security_protocol: str = "PLAINTEXT"
    authenticated: bool = True  # a SASL connection starts unauthenticated
    token_authenticated: bool = False  # logged in with a delegation token (SCRAM tokenauth)
    client_id: str = ""
    software_name: str = ""
    software_version: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)

"""Kafka's ZooKeeper-backed ACL authorizer (AclAuthorizer): the ACL znodes and their change
notifications (acl_store, acl_change_listener), the in-memory cache decisions are made
from (acl_snapshot), the decision log (audit) and the authorizer itself (acl_authorizer).
The ACL model and the decision rule are moldau.security.acls. Sits above moldau.cluster: it
uses the broker's ZooKeeper session."""

"""`Space`: the client. Its configuration is read once, here: arguments, else SPACE_API_URL and SPACE_API_KEY."""

from __future__ import annotations

import base64
import builtins
import json
import os
import ssl
from typing import IO, Any, Iterator
from urllib.parse import quote, urlencode

from ._transport import Body, RetryPolicy, Transport, file_chunks, present
from .errors import SpaceClientError
from .session import CheckpointFiles, Session, SessionHandle
from .wire_types import CheckpointDiffData, FileDiffData, SecretGrantData


class Sessions:
    def __init__(self, t: Transport) -> None:
        self._t = t

    def create(self, *, timeout: float | None = None, **options: Any) -> Session:
        """Creates a session and its sandbox. `options` are the API's, in its names: `template="code-interpreter"`, `env={...}`, `idleTimeoutSec=0`, ..."""
        return Session(self._t, self._t.json("POST", "/v1/sessions", json=options, timeout=timeout))

    def get(self, session_id: str, *, timeout: float | None = None) -> Session:
        return Session(self._t, self._t.json("GET", f"/v1/sessions/{quote(session_id, safe='')}", timeout=timeout))

    def list(self, *, timeout: float | None = None) -> list[Session]:
        return [Session(self._t, data) for data in self._t.json("GET", "/v1/sessions", timeout=timeout)["sessions"]]

    def handle(self, session_id: str) -> SessionHandle:
        """A handle on a session by id, made without a call: for operations that need only the id."""
        return SessionHandle(self._t, session_id)

    def delete(self, session_id: str, *, timeout: float | None = None) -> None:
        self.handle(session_id).delete(timeout=timeout)


class Checkpoints:
    def __init__(self, t: Transport) -> None:
        self._t = t

    def fork(
        self, checkpoint_id: str, *, count: int = 1, secrets: list[str | SecretGrantData] | None = None, timeout: float | None = None
    ) -> list[Session]:
        """`count` new sessions from a checkpoint, each with a parent link (processes continue in every fork of a full one).

        `secrets`: the forks' own instead of the parent's, fewer or others under the same env var names
        (`{"name": "GITHUB_TOKEN", "secret": "GITHUB_TOKEN_READONLY"}`)."""
        body: dict[str, Any] = {"count": count, **({"secrets": secrets} if secrets is not None else {})}
        reply = self._t.json("POST", f"/v1/checkpoints/{quote(checkpoint_id, safe='')}/fork", json=body, timeout=timeout)
        return [Session(self._t, data) for data in reply["sessions"]]

    def diff(self, source: str, to: str, *, after: str | None = None, limit: int | None = None, timeout: float | None = None) -> CheckpointDiffData:
        """One page of what differs from checkpoint `source` to `to` (one lineage), by path: pass `next` as `after` for the next.

        `to` may be `"live"`: the session's files now, checkpointed first; the answer's `to` names that checkpoint, for the next pages.
        """
        query = urlencode({"to": to, **({"after": after} if after is not None else {}), **({"limit": limit} if limit is not None else {})})
        return self._t.json("GET", f"/v1/checkpoints/{quote(source, safe='')}/diff?{query}", timeout=timeout)

    def diff_file(self, source: str, to: str, path: str, *, timeout: float | None = None) -> FileDiffData:
        """One file in checkpoints `source` and `to` (or `"live"`): sizes, sha256, and a unified diff of text (`unified`)."""
        return self._t.json("GET", f"/v1/checkpoints/{quote(source, safe='')}/diff/file?{urlencode({'to': to, 'path': path})}", timeout=timeout)

    def files(self, checkpoint_id: str) -> CheckpointFiles:
        """A checkpoint's files as they were, read without a sandbox: `space.checkpoints.files(c).read("app/config.yaml")`."""
        return CheckpointFiles(self._t, checkpoint_id)


class Secrets:
    """The tenant's secrets: values go in, never come out; a sandbox sees a placeholder the gateway swaps at egress."""

    def __init__(self, t: Transport) -> None:
        self._t = t

    def set(self, name: str, value: str, *, hosts: list[str], timeout: float | None = None) -> dict[str, Any]:
        return self._t.json("PUT", f"/v1/secrets/{quote(name, safe='')}", json={"value": value, "hosts": hosts}, timeout=timeout)

    def list(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        return self._t.json("GET", "/v1/secrets", timeout=timeout)["secrets"]

    def delete(self, name: str, *, timeout: float | None = None) -> None:
        self._t.json("DELETE", f"/v1/secrets/{quote(name, safe='')}", timeout=timeout)


class Templates:
    """The built-in templates and the tenant's own (from a session, a checkpoint or a Dockerfile)."""

    def __init__(self, t: Transport) -> None:
        self._t = t

    def list(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        return self._t.json("GET", "/v1/templates", timeout=timeout)["templates"]

    def create(self, name: str, *, from_session: str | None = None, from_checkpoint: str | None = None, timeout: float | None = None) -> dict[str, Any]:
        return self._t.json("POST", "/v1/templates", json=present(name=name, fromSession=from_session, fromCheckpoint=from_checkpoint), timeout=timeout)

    def build(self, name: str, dockerfile: str, *, files: dict[str, bytes] | None = None, timeout: float | None = None, **options: Any) -> dict[str, Any]:
        """Starts a Dockerfile build (`files`: its context, path to content); `build_log(name, build["id"])` follows it."""
        encoded = {path: base64.b64encode(data).decode() for path, data in (files or {}).items()}
        return self._t.json("POST", "/v1/templates", json={"name": name, "dockerfile": dockerfile, "files": encoded, **options}, timeout=timeout)

    def get_build(self, name: str, build_id: str, *, timeout: float | None = None) -> dict[str, Any]:
        return self._t.json("GET", f"/v1/templates/{quote(name, safe='')}/builds/{quote(build_id, safe='')}", timeout=timeout)

    def build_log(self, name: str, build_id: str, *, follow: bool = True) -> Iterator[str]:
        """The build's log as it is written (until the build ends, with `follow`)."""
        res = self._t.request("GET", f"/v1/templates/{quote(name, safe='')}/builds/{quote(build_id, safe='')}/logs{'?follow=1' if follow else ''}", timeout=24 * 3600)
        try:
            while line := res.readline():
                yield line.decode("utf-8", "replace")
        finally:
            res.close()

    def import_(self, name: str, *, archive: bytes | IO[bytes] | None = None, image: str | None = None, timeout: float = 3600.0) -> dict[str, Any]:
        """Makes a template of an OCI image: `archive` (an OCI layout or `docker save` tar, bytes or a file object,
        streamed), or `image` (a reference the server may pull). TypeScript's `templates.import`."""
        path = f"/v1/templates/{quote(name, safe='')}/image"
        if (archive is None) == (image is None):
            raise SpaceClientError("BAD_REQUEST", "templates.import_ takes one of archive= or image=")
        if archive is None:
            return self._t.json("POST", path, json={"image": image}, timeout=timeout)
        body: Body = archive if isinstance(archive, bytes) else file_chunks(archive)
        return self._t.json("POST", path, body=body, headers={"content-type": "application/x-tar"}, timeout=timeout)

    def delete(self, name: str, *, force: bool = False, timeout: float | None = None) -> None:
        self._t.json("DELETE", f"/v1/templates/{quote(name, safe='')}{'?force=1' if force else ''}", timeout=timeout)


class Volumes:
    """The tenant's volumes: named filesystems that outlive sessions (one writer at a time)."""

    def __init__(self, t: Transport) -> None:
        self._t = t

    def create(self, name: str, *, size_gb: float | None = None, from_snapshot: str | None = None, timeout: float | None = None) -> dict[str, Any]:
        return self._t.json("POST", "/v1/volumes", json=present(name=name, sizeGb=size_gb, fromSnapshot=from_snapshot), timeout=timeout)

    def list(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        return self._t.json("GET", "/v1/volumes", timeout=timeout)["volumes"]

    def get(self, name: str, *, timeout: float | None = None) -> dict[str, Any]:
        return self._t.json("GET", f"/v1/volumes/{quote(name, safe='')}", timeout=timeout)

    def delete(self, name: str, *, timeout: float | None = None) -> None:
        self._t.json("DELETE", f"/v1/volumes/{quote(name, safe='')}", timeout=timeout)

    def snapshot(self, name: str, *, timeout: float | None = None) -> dict[str, Any]:
        return self._t.json("POST", f"/v1/volumes/{quote(name, safe='')}/snapshots", timeout=timeout)

    def snapshots(self, name: str, *, timeout: float | None = None) -> builtins.list[dict[str, Any]]:
        return self._t.json("GET", f"/v1/volumes/{quote(name, safe='')}/snapshots", timeout=timeout)["snapshots"]

    def delete_snapshot(self, name: str, snapshot_id: str, *, timeout: float | None = None) -> None:
        self._t.json("DELETE", f"/v1/volumes/{quote(name, safe='')}/snapshots/{quote(snapshot_id, safe='')}", timeout=timeout)


class Nodes:
    """The cluster's nodes (the admin key)."""

    def __init__(self, t: Transport) -> None:
        self._t = t

    def list(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        return self._t.json("GET", "/v1/nodes", timeout=timeout)["nodes"]

    def drain(self, node_id: str, *, timeout: float | None = 3600) -> dict[str, Any]:
        """The node takes no new sessions, and each of its sessions moves to another node."""
        return self._t.json("POST", f"/v1/nodes/{quote(node_id, safe='')}/drain", timeout=timeout)

    def undrain(self, node_id: str, *, timeout: float | None = None) -> dict[str, Any]:
        return self._t.json("POST", f"/v1/nodes/{quote(node_id, safe='')}/undrain", timeout=timeout)

    def join_token(self, *, ttl_sec: int | None = None, uses: int | None = None, timeout: float | None = None) -> dict[str, Any]:
        """A token for new nodes (`SPACE_NODE_JOIN_TOKEN`), usable for `ttl_sec` (an hour by default) by `uses` nodes (one by default)."""
        body = {k: v for k, v in (("ttlSec", ttl_sec), ("uses", uses)) if v is not None}
        return self._t.json("POST", "/v1/nodes/join-tokens", json=body, timeout=timeout)

    def revoke_credential(self, node_id: str, *, timeout: float | None = None) -> dict[str, Any]:
        """Revokes a node's credential: its heartbeats are refused and its sessions move on once it is found lost."""
        return self._t.json("DELETE", f"/v1/nodes/{quote(node_id, safe='')}/credential", timeout=timeout)


class Space:
    """SPACE's API. `api_url`: one URL or several control planes' (a call that cannot connect to one goes to the next).

    Every call takes `timeout` (seconds to wait on the network, default `timeout` here: 120);
    a `429` refused before anything was done is waited out by its `Retry-After` (`retry`).
    `https://` URLs are verified against the system's trusted CAs, or against `tls` (an `ssl.SSLContext`),
    calls and streams alike.
    """

    sessions: Sessions
    checkpoints: Checkpoints
    secrets: Secrets
    templates: Templates
    volumes: Volumes
    #: The cluster's nodes (the admin key).
    nodes: Nodes

    def __init__(self, api_url: str | list[str] | None = None, api_key: str | None = None, *, timeout: float = 120.0,
                 retry: RetryPolicy = RetryPolicy(), env: dict[str, str] | None = None, tls: ssl.SSLContext | None = None) -> None:
        environ = os.environ if env is None else env
        key = api_key or environ.get("SPACE_API_KEY")
        if not key:
            raise SpaceClientError("CONFIGURATION", "no API key: pass api_key= or set SPACE_API_KEY")
        urls = api_url if isinstance(api_url, list) else (api_url or environ.get("SPACE_API_URL") or "http://127.0.0.1:7070").split(",")
        urls = [u.strip().rstrip("/") for u in urls if u.strip()]
        for url in urls:
            if not url.startswith(("http://", "https://")):
                raise SpaceClientError("CONFIGURATION", f"SPACE_API_URL (or api_url) must be http:// or https:// URLs, not {url!r}")
        self._t = Transport(urls, key, timeout, retry, tls)
        self.sessions = Sessions(self._t)
        self.checkpoints = Checkpoints(self._t)
        self.secrets = Secrets(self._t)
        self.templates = Templates(self._t)
        self.volumes = Volumes(self._t)
        self.nodes = Nodes(self._t)

    def events(self) -> Iterator[dict[str, Any]]:
        """The tenant's events from now on (sessions created, changing status, deleted; checkpoints taken, deleted), until the iterator is closed."""
        # Subscribed here, not at the first next(): what happens after this call is seen.
        res = self._t.request("GET", "/v1/events", timeout=24 * 3600)

        def records() -> Iterator[dict[str, Any]]:
            try:
                data: list[str] = []
                while line := res.readline():
                    text = line.decode("utf-8", "replace").rstrip("\r\n")
                    if text.startswith("data: "):
                        data.append(text[6:])
                    elif not text and data:
                        yield json.loads("\n".join(data))
                        data = []
            finally:
                res.close()

        return records()

    @property
    def api_url(self) -> str:
        """The URL of the control plane in use."""
        return self._t.api_url

    def limits(self, *, timeout: float | None = None) -> dict[str, Any]:
        """The tenant's limits and what it uses of them."""
        return self._t.json("GET", "/v1/limits", timeout=timeout)

    def usage(
        self,
        *,
        from_: str | None = None,
        to: str | None = None,
        group_by: str | None = None,
        session_id: str | None = None,
        tenant: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """What the tenant (admin key: every tenant, or `tenant`) used over whole UTC hours (ISO 8601 `from_`/`to`,
        default the last 24 hours), grouped by `group_by` (`tenant`, `session` or `day`, the default)."""
        given = {"from": from_, "to": to, "groupBy": group_by, "sessionId": session_id, "tenant": tenant}
        query = urlencode({k: v for k, v in given.items() if v is not None})
        return self._t.json("GET", f"/v1/usage{'?' + query if query else ''}", timeout=timeout)

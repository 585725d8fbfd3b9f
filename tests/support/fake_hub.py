"""A model hub of the tests' own on loopback, in the Hugging Face Hub's URL layout, for the real
`huggingface_hub` client (no machine here reaches the real hub).

What the installed client (2.x) asks, read from its source:
- search: `GET /api/models?search=Q&filter=gguf&sort=downloads&limit=N` (pages follow a `Link: rel="next"`);
- a repository: `GET /api/models/{repo}` (its `sha` is the commit), and its files:
  `GET /api/models/{repo}/tree/{rev}?recursive=…` with `size`, `oid` and for LFS files `lfs.oid` (sha256),
  `lfs.size`, `lfs.pointerSize`;
- a file: `HEAD /{repo}/resolve/{rev}/{path}` answered as the hub answers for an LFS file: `302` to a CDN on
  another origin, with `X-Repo-Commit`, `X-Linked-Etag` (the sha256), `X-Linked-Size` and `ETag`; the bytes
  are fetched from the CDN (`GET`, `Range: bytes=a-` / `a-b`, `206` + `Content-Range`), without the token.

`HubServer.requests` records every request (method, path, headers) for the tests' assertions. Faults:
`drop_once_after[sha] = n` closes the connection after n bytes of the next body of that blob (the client must
resume); `hold_after = (sha, n, event)` stops after n bytes of the first body until `event` is set.
A client that goes away (a cancel, a full disk) is not an error here, as it is not at the real hub: nothing is
printed, not even when the server thread only notices at its next read of the kept-alive connection (it would land
in the test's captured stderr on a busy machine, where that read comes late).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

_CHUNK = 1 << 20


@dataclass
class HubFile:
    path: str
    source: Path
    sha256: str
    size: int

    @property
    def git_oid(self) -> str:
        return hashlib.sha1(self.sha256.encode()).hexdigest()


@dataclass
class HubRepo:
    repo_id: str
    files: list[HubFile]
    commit: str = "0123456789abcdef0123456789abcdef01234567"
    downloads: int = 1000


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(8 * _CHUNK):
            h.update(chunk)
    return h.hexdigest()


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    port: int


@dataclass
class HubServer:
    """The hub (api + resolve) on one port and its CDN on another (another origin, as the real hub's)."""

    repos: dict[str, HubRepo] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    drop_once_after: dict[str, int] = field(default_factory=dict)
    hold_after: tuple[str, int, threading.Event] | None = None
    served: dict[str, int] = field(default_factory=dict)  # body bytes sent per blob
    _servers: list[ThreadingHTTPServer] = field(default_factory=list)
    _threads: list[threading.Thread] = field(default_factory=list)

    def add(self, repo: HubRepo) -> None:
        self.repos[repo.repo_id] = repo

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._servers[0].server_address[1]}"

    @property
    def cdn(self) -> str:
        return f"http://127.0.0.1:{self._servers[1].server_address[1]}"

    def blob(self, sha: str) -> HubFile | None:
        return next((f for r in self.repos.values() for f in r.files if f.sha256 == sha), None)

    def start(self) -> HubServer:
        for role in ("hub", "cdn"):
            srv = _HubHTTPServer(("127.0.0.1", 0), _handler(self, role))
            srv.daemon_threads = True
            t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05},
                                 name=f"fake-hub-{role}", daemon=True)
            t.start()
            self._servers.append(srv)
            self._threads.append(t)
        return self

    def stop(self) -> None:
        if self.hold_after is not None:
            self.hold_after[2].set()
        for srv in self._servers:
            srv.shutdown()
            srv.server_close()
        for t in self._threads:
            t.join(5)

    def body_requests(self, sha: str) -> list[Request]:
        return [r for r in self.requests if r.method == "GET" and r.path == f"/blobs/{sha}"]


class _HubHTTPServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):  # the client closed the connection: not the hub's fault
            return
        super().handle_error(request, client_address)


def _handler(hub: HubServer, role: str):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args) -> None:  # quiet
            pass

        def do_HEAD(self) -> None:
            self._route(body=False)

        def do_GET(self) -> None:
            self._route(body=True)

        def _route(self, body: bool) -> None:
            url = urlsplit(self.path)
            hub.requests.append(Request(self.command, url.path, {k.lower(): v for k, v in self.headers.items()},
                                        self.server.server_address[1]))
            if role == "cdn":
                m = re.fullmatch(r"/blobs/([0-9a-f]{64})", url.path)
                f = hub.blob(m.group(1)) if m else None
                return self._serve_file(f, body) if f else self._json(404, {"error": "no such blob"})
            if url.path == "/api/models":
                return self._search(parse_qs(url.query))
            if url.path.startswith("/api/models/"):
                return self._api_repo(unquote(url.path[len("/api/models/"):]))
            m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", url.path)
            if m:
                return self._resolve(m.group(1), unquote(m.group(2)), unquote(m.group(3)))
            self._json(404, {"error": "not found"})

        def _json(self, status: int, payload, extra: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def _search(self, query: dict[str, list[str]]) -> None:
            words = (query.get("search") or [""])[0].lower()
            hits = [r for r in hub.repos.values() if words in r.repo_id.lower()]
            self._json(200, [{"id": r.repo_id, "downloads": r.downloads, "likes": 3, "tags": ["gguf"],
                              "lastModified": "2026-11-30T10:00:00.000Z", "private": False, "gated": False}
                             for r in sorted(hits, key=lambda r: -r.downloads)])

        def _api_repo(self, rest: str) -> None:
            repo_id, _, tree = rest.partition("/tree/")
            repo_id = repo_id.split("/revision/")[0]
            repo = hub.repos.get(repo_id)
            if repo is None:
                return self._json(404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})
            if not tree:
                return self._json(200, {"id": repo.repo_id, "sha": repo.commit, "private": False, "gated": False,
                                        "lastModified": "2026-11-30T10:00:00.000Z", "tags": ["gguf"],
                                        "siblings": [{"rfilename": f.path} for f in repo.files]})
            entries = [{"type": "file", "path": "README.md", "size": 24, "oid": "f" * 40}]
            folders = sorted({f.path.rsplit("/", 1)[0] for f in repo.files if "/" in f.path})
            entries += [{"type": "directory", "path": d, "oid": "d" * 40} for d in folders]
            entries += [{"type": "file", "path": f.path, "size": f.size, "oid": f.git_oid,
                         "lfs": {"oid": f.sha256, "size": f.size, "pointerSize": 134}} for f in repo.files]
            self._json(200, entries)

        def _resolve(self, repo_id: str, _revision: str, path: str) -> None:
            repo = hub.repos.get(repo_id)
            if repo is None:
                return self._json(404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})
            f = next((x for x in repo.files if x.path == path), None)
            if f is None:
                return self._json(404, {"error": "Entry not found"},
                                  {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": repo.commit})
            self.send_response(302)
            self.send_header("Location", f"{hub.cdn}/blobs/{f.sha256}")
            self.send_header("X-Repo-Commit", repo.commit)
            self.send_header("X-Linked-Etag", f'"{f.sha256}"')
            self.send_header("X-Linked-Size", str(f.size))
            self.send_header("ETag", f'"{f.git_oid}"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _serve_file(self, f: HubFile, body: bool) -> None:
            start, end = 0, f.size - 1
            rng = self.headers.get("Range")
            if rng:
                m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
                if not m or int(m.group(1)) >= f.size:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{f.size}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                start = int(m.group(1))
                end = min(int(m.group(2)), f.size - 1) if m.group(2) else f.size - 1
            self.send_response(206 if rng else 200)
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("ETag", f'"{f.sha256}"')
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(end - start + 1))
            if rng:
                self.send_header("Content-Range", f"bytes {start}-{end}/{f.size}")
            self.end_headers()
            if not body:
                return
            drop = hub.drop_once_after.pop(f.sha256, None)
            hold = hub.hold_after if hub.hold_after and hub.hold_after[0] == f.sha256 else None
            if hold:
                hub.hold_after = None
            sent = 0
            with open(f.source, "rb") as fh:
                fh.seek(start)
                left = end - start + 1
                while left > 0:
                    n = min(_CHUNK, left)
                    if drop is not None and sent + n > drop:
                        n = drop - sent
                    if hold is not None and sent + n > hold[1]:
                        n = hold[1] - sent
                    if n > 0:
                        chunk = fh.read(n)
                        try:
                            self.wfile.write(chunk)
                        except (BrokenPipeError, ConnectionResetError):  # the client cancelled
                            self.close_connection = True
                            return
                        hub.served[f.sha256] = hub.served.get(f.sha256, 0) + len(chunk)
                        sent += len(chunk)
                        left -= len(chunk)
                    if drop is not None and sent >= drop:
                        self.wfile.flush()
                        self.close_connection = True
                        return  # the rest of the body never comes: the client sees the connection end
                    if hold is not None and sent >= hold[1]:
                        self.wfile.flush()
                        hold[2].wait(30)
                        hold = None

    return Handler


DEMO_REPO = "ggml-demo/gemma-3-270m-it-GGUF"
DEMO_FILE = "gemma-3-270m-it-Q4_K_M.gguf"


def serve_demo(demo_model: Path, demo_sha: str, monkeypatch) -> HubServer:
    """A started hub holding the demo model as `DEMO_REPO/DEMO_FILE`, and the environment pointing at it
    (HF_ENDPOINT; no token, none read from the machine). Stop it with `stop()`."""
    server = HubServer()
    server.add(HubRepo(DEMO_REPO, [HubFile(DEMO_FILE, demo_model, demo_sha, demo_model.stat().st_size)]))
    server.start()
    monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    return server

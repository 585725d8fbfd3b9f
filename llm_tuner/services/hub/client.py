"""The model hub through its own client library (`huggingface_hub`): search, a repository's GGUF models,
and where a file is.

Settings come from the environment at each call, as the library's own command line reads them: `HF_ENDPOINT`
(a mirror or a local server; the library reads it only once, at import, so it is passed explicitly) and
`HF_TOKEN` (gated and private repositories). Without `HF_TOKEN` the library's stored login (`hf auth login`)
is used. The token is never logged, shown or put in a message: `Hub` keeps it out of its repr.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx2
from huggingface_hub import HfApi, get_hf_file_metadata, get_session, hf_hub_url
from huggingface_hub.errors import GatedRepoError, HFValidationError, RepositoryNotFoundError
from huggingface_hub.hf_api import RepoFile as HubFile
from huggingface_hub.utils import build_hf_headers

from llm_tuner.core import flags
from llm_tuner.core.hub_files import RemoteFile, RemoteModel, gguf_models

DEFAULT_ENDPOINT = "https://huggingface.co"
#: How long a metadata request may take before it is an error the user sees (seconds).
METADATA_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Hub:
    """Where the hub is and who asks. `token` None: the library's stored login, if any."""

    endpoint: str = DEFAULT_ENDPOINT
    token: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Hub:
        env = os.environ if environ is None else environ
        endpoint = (env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
        return cls(endpoint, env.get(flags.HF_TOKEN_ENV) or None)  # llama-server's --hf-token reads it too

    def api(self) -> HfApi:
        return HfApi(endpoint=self.endpoint, token=self.token)

    def headers(self, *, auth: bool = True) -> dict[str, str]:
        """The library's request headers (user agent, token); `auth=False` for a host off the hub (a CDN)."""
        headers = build_hf_headers(token=self.token if auth else False)
        headers["Accept-Encoding"] = "identity"  # sizes and byte ranges of the file itself
        return headers

    def on_hub(self, url: str) -> bool:
        """Whether `url` is on the hub's own origin (the token goes there and nowhere else)."""
        a, b = urlsplit(url), urlsplit(self.endpoint)
        return (a.scheme, a.hostname, a.port) == (b.scheme, b.hostname, b.port)


@dataclass(frozen=True)
class RepoHit:
    """One search result."""

    repo_id: str
    downloads: int | None = None
    likes: int | None = None
    last_modified: str | None = None  # ISO date
    gated: bool = False


def search_models(hub: Hub, query: str, *, limit: int = 50) -> list[RepoHit]:
    """Repositories with GGUF files whose name contains `query`, most downloaded first."""
    query = query.strip()
    if not query:
        return []
    ensure_reachable(hub)
    out = []
    for m in hub.api().list_models(search=query, filter="gguf", sort="downloads", limit=limit):
        modified = m.last_modified.date().isoformat() if m.last_modified else None
        out.append(RepoHit(m.id, m.downloads, m.likes, modified, bool(m.gated)))
    return out


def ensure_reachable(hub: Hub) -> None:
    """One plain request to the hub's origin; raises the network's error (`NETWORK_ERRORS`) at once. The
    library's paginated listings retry a refused connection five times with backoff, so an offline machine
    else waited ~23 s for "cannot reach". Any HTTP answer counts as reachable (a mirror may say 404)."""
    get_session().head(hub.endpoint, timeout=METADATA_TIMEOUT_S)


def list_gguf_models(hub: Hub, repo_id: str, revision: str | None = None) -> list[RemoteModel]:
    """The repository's GGUF models (split sets grouped) at one commit: the repository's current commit when
    `revision` is None, so the listing, the header reads and the download all see the same files."""
    api = hub.api()
    info = api.model_info(repo_id.strip(), revision=revision)
    commit = info.sha or revision or "main"
    files = [RemoteFile(f.path, f.lfs.size if f.lfs else f.size, f.lfs.sha256 if f.lfs else None)
             for f in api.list_repo_tree(info.id, recursive=True, revision=commit)
             if isinstance(f, HubFile)]  # folders are listed too
    return gguf_models(info.id, commit, files)


@dataclass(frozen=True)
class FileLocation:
    """Where one file's bytes are (the hub redirects large files to a CDN), with what the hub says of it."""

    url: str
    size_bytes: int | None
    etag: str | None
    headers: dict[str, str] = field(repr=False)


def locate(hub: Hub, model: RemoteModel, part: RemoteFile) -> FileLocation:
    """Ask the hub where `part` is (HEAD on its resolve URL, as the library's own download does)."""
    url = hf_hub_url(model.repo_id, part.path, revision=model.revision, endpoint=hub.endpoint)
    meta = get_hf_file_metadata(url, token=hub.token, endpoint=hub.endpoint, timeout=METADATA_TIMEOUT_S)
    where = meta.location or url
    return FileLocation(where, meta.size, meta.etag, hub.headers(auth=hub.on_hub(where)))


#: The hub's refusals of what was asked (a gated or missing repository, a name that is not one): bad input,
#: not a failure of the hub or the network. Callers outside this package catch these, not the library's.
BAD_INPUT_ERRORS: tuple[type[Exception], ...] = (GatedRepoError, HFValidationError, RepositoryNotFoundError)

#: The network failing under a request (no connection, a timeout): `describe_error` says to check the network.
NETWORK_ERRORS: tuple[type[Exception], ...] = (httpx2.ConnectError, httpx2.TimeoutException)


def describe_error(exc: BaseException, hub: Hub) -> str:
    """One line for the user on what went wrong talking to the hub and what to do; never the token (the
    library's messages carry the URL and the server's words, not headers)."""
    if isinstance(exc, GatedRepoError):
        return "this repository is gated: accept its terms on the hub's page, then set HF_TOKEN"
    if isinstance(exc, RepositoryNotFoundError):
        return "repository not found (a private one needs HF_TOKEN)"
    if isinstance(exc, HFValidationError):
        return "not a repository name (owner/name)"
    if isinstance(exc, NETWORK_ERRORS):
        return f"cannot reach {hub.endpoint} ({exc}); check the network, or HF_ENDPOINT for a mirror"
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__

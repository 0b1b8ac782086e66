"""A data root on object storage: `s3a://bucket/prefix` (docs/object-storage.md).

Spark reaches such a root through Hadoop's S3A connector (`s3a://`); Delta's
Python reader (`deltalake`) through its own object store; our own
bookkeeping (landing listings, manifests, checkpoint guards) through
pyarrow's `S3FileSystem`, and the writer lock, which needs conditional
writes (`If-None-Match`, `If-Match`) that pyarrow does not offer, through
boto3. `S3Path` gives the part of `pathlib.Path`'s interface the pipeline
uses, so code that reads and writes small files under the data root works
on either kind of root: `str()` of an `S3Path` is the `s3a://` URI Spark
takes.

S3 has no folders: a "folder" is a key prefix, which exists while some key
starts with it; `mkdir` writes an empty marker object (`<key>/`), as Hadoop
and pyarrow do. A PUT replaces an object whole, so writing is atomic
without a rename. Connection settings come from the standard AWS variables,
read once by `lakehouse.runtime.settings`.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NamedTuple
from urllib.parse import unquote, urlparse

from lakehouse.errors import LakehouseError

if TYPE_CHECKING:
    import pyarrow.fs as pafs

URI = re.compile(r"(?P<scheme>s3a?)://(?P<bucket>[^/]+)/?(?P<key>.*)")


@dataclass(frozen=True)
class S3Connection:
    """Where the S3 API is and who we are there (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...).

    `endpoint_url` None: Amazon S3 itself. Keys None: the AWS SDKs' default
    chain (instance profile, web identity, ~/.aws) finds them.
    """

    endpoint_url: str | None = None
    region: str = "us-east-1"
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)

    @property
    def path_style(self) -> bool:
        """Buckets in the path (`http://host/bucket/key`): what S3-compatible servers serve."""
        return self.endpoint_url is not None

    def client(self) -> Any:
        """boto3's S3 client: the writer lock's conditional writes, which pyarrow lacks."""
        return _client(self)

    def filesystem(self) -> pafs.S3FileSystem:
        return _filesystem(self)

    def spark_conf(self) -> dict[str, str]:
        """S3A's settings for this connection (Hadoop's `fs.s3a.*`, as `spark.hadoop.*`)."""
        conf = {"spark.hadoop.fs.s3a.endpoint.region": self.region}
        if self.endpoint_url:
            conf["spark.hadoop.fs.s3a.endpoint"] = self.endpoint_url
            conf["spark.hadoop.fs.s3a.path.style.access"] = "true"
            conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(
                self.endpoint_url.startswith("https://")
            ).lower()
        if self.access_key_id and self.secret_access_key:
            # Spark redacts keys matching `secret|access.key` in its UI and logs.
            conf["spark.hadoop.fs.s3a.access.key"] = self.access_key_id
            conf["spark.hadoop.fs.s3a.secret.key"] = self.secret_access_key
        return conf

    def environment(self) -> dict[str, str]:
        """The same connection as the AWS variables, for a child process (which reads them
        back in `runtime.settings`); AWS_ALLOW_HTTP is for delta-rs on a plain-http endpoint."""
        env = {"AWS_REGION": self.region}
        if self.endpoint_url:
            env["AWS_ENDPOINT_URL"] = self.endpoint_url
            if self.endpoint_url.startswith("http://"):
                env["AWS_ALLOW_HTTP"] = "true"
        if self.access_key_id and self.secret_access_key:
            env["AWS_ACCESS_KEY_ID"] = self.access_key_id
            env["AWS_SECRET_ACCESS_KEY"] = self.secret_access_key
        return env

    def storage_options(self) -> dict[str, str]:
        """The same connection for `deltalake` (delta-rs's object store), which reads s3://."""
        options = self.environment()
        if self.endpoint_url:
            options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
        return options


@functools.cache
def _client(connection: S3Connection) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=connection.endpoint_url,
        region_name=connection.region,
        aws_access_key_id=connection.access_key_id,
        aws_secret_access_key=connection.secret_access_key,
        config=Config(
            s3={"addressing_style": "path" if connection.path_style else "auto"},
            retries={"mode": "standard", "max_attempts": 5},
        ),
    )


@functools.cache
def _filesystem(connection: S3Connection) -> pafs.S3FileSystem:
    """pyarrow's S3 filesystem for the connection: path-style with an endpoint of its
    own, Amazon S3's virtual hosts without; keys None: the AWS SDK's default chain."""
    endpoint = urlparse(connection.endpoint_url) if connection.endpoint_url else None
    keys = (
        {"access_key": connection.access_key_id, "secret_key": connection.secret_access_key}
        if connection.access_key_id and connection.secret_access_key
        else {}
    )
    from pyarrow import fs

    return fs.S3FileSystem(
        **keys,
        region=connection.region,
        endpoint_override=endpoint.netloc if endpoint else None,
        scheme=endpoint.scheme if endpoint else "https",
        retry_strategy=fs.AwsStandardS3RetryStrategy(max_attempts=5),
    )


class ObjectStat(NamedTuple):
    st_size: int
    st_mtime: float
    st_mtime_ns: int


class PreconditionFailedError(Exception):
    """A conditional write or delete found the object not as expected (HTTP 412)."""


class ObjectStoreError(LakehouseError):
    """The object store failed a read (the network, the service): not the object's fault,
    unlike an `OSError` a caller takes for a damaged file."""


@dataclass(frozen=True, order=True)
class S3Path:
    """A key (or key prefix) in a bucket, with the part of pathlib's API the pipeline uses."""

    bucket: str
    key: str
    connection: S3Connection = field(compare=False, repr=False)

    @classmethod
    def from_uri(cls, uri: str, connection: S3Connection) -> S3Path:
        match = URI.fullmatch(uri)
        if not match:
            raise ValueError(f"not an S3 URI: {uri!r} (expected s3a://bucket/prefix)")
        return cls(match["bucket"], match["key"].strip("/"), connection)

    # -- names ---------------------------------------------------------------
    def __str__(self) -> str:
        """The URI Spark's S3A connector takes."""
        return f"s3a://{self.bucket}/{self.key}" if self.key else f"s3a://{self.bucket}"

    @property
    def uri(self) -> str:
        """The same object as `s3://`: the scheme deltalake and other S3 clients take."""
        return "s3" + str(self)[3:]

    def __truediv__(self, part: str) -> S3Path:
        return self.joinpath(part)

    def joinpath(self, *parts: str) -> S3Path:
        key = "/".join(p.strip("/") for p in (self.key, *parts) if p.strip("/"))
        return S3Path(self.bucket, key, self.connection)

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def parent(self) -> S3Path:
        return S3Path(self.bucket, self.key.rpartition("/")[0], self.connection)

    def with_name(self, name: str) -> S3Path:
        return self.parent / name

    def resolve(self) -> S3Path:
        return self

    absolute = resolve

    def relative_to(self, other: S3Path) -> str:
        if self.bucket != other.bucket or not (self.key + "/").startswith(other.key + "/"):
            raise ValueError(f"{self} is not under {other}")
        return self.key[len(other.key) :].lstrip("/")

    # -- reading (pyarrow.fs) ------------------------------------------------
    @property
    def _fs(self) -> pafs.S3FileSystem:
        return self.connection.filesystem()

    @property
    def _arrow(self) -> str:
        """The path as pyarrow names it: bucket/key."""
        return f"{self.bucket}/{self.key}" if self.key else self.bucket

    def _of(self, info: pafs.FileInfo) -> S3Path:
        return S3Path(self.bucket, info.path.partition("/")[2], self.connection)

    def _type(self) -> pafs.FileType:
        return self._fs.get_file_info(self._arrow).type

    def is_file(self) -> bool:
        from pyarrow.fs import FileType

        return bool(self.key) and self._type() == FileType.File

    def is_dir(self) -> bool:
        """A marker object (`<key>/`) or any key under the prefix."""
        from pyarrow.fs import FileType

        return self._type() == FileType.Directory

    def exists(self) -> bool:
        from pyarrow.fs import FileType

        return self._type() != FileType.NotFound

    def stat(self) -> ObjectStat:
        from pyarrow.fs import FileType

        info = self._fs.get_file_info(self._arrow)
        if not self.key or info.type != FileType.File:
            raise FileNotFoundError(str(self))
        return _stat(info)

    def _below(self, recursive: bool) -> list[pafs.FileInfo]:
        from pyarrow.fs import FileSelector

        selector = FileSelector(self._arrow, allow_not_found=True, recursive=recursive)
        return list(self._fs.get_file_info(selector))

    def objects(self) -> Iterator[tuple[S3Path, ObjectStat]]:
        """Every object under this prefix, at any depth (folder markers left out)."""
        from pyarrow.fs import FileType

        for info in self._below(recursive=True):
            if info.type == FileType.File:
                yield self._of(info), _stat(info)

    def listing(self) -> tuple[list[tuple[S3Path, ObjectStat]], list[S3Path]]:
        """One level under this prefix: its objects with their sizes, and its sub-prefixes."""
        from pyarrow.fs import FileType

        below = self._below(recursive=False)
        files = [(self._of(i), _stat(i)) for i in below if i.type == FileType.File]
        folders = [self._of(i) for i in below if i.type == FileType.Directory]
        return files, folders

    def iterdir(self) -> Iterator[S3Path]:
        files, folders = self.listing()
        yield from sorted([path for path, _ in files] + folders)

    def glob(self, pattern: str) -> Iterator[S3Path]:
        """Matches of a relative pattern of `*`-style segments (no `**`), files and folders:
        one listing per level, never the whole tree below."""
        head, _, rest = pattern.partition("/")
        for child in self.iterdir():
            if fnmatch.fnmatchcase(child.name, head):
                yield from child.glob(rest) if rest else (child,)

    def read_bytes(self) -> bytes:
        with self.open_binary() as stream:
            return stream.read()

    def read_text(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return self.read_bytes().decode(encoding, errors)

    def open_binary(self) -> ObjectStream:
        """The object as a stream, read as it is consumed (constant memory). A missing
        object is a `FileNotFoundError`; a failing store, an `ObjectStoreError`."""
        with _store_errors(self):
            return ObjectStream(self, self._fs.open_input_stream(self._arrow))

    # -- writing (pyarrow.fs) ------------------------------------------------
    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """An empty folder marker (the key and a slash), as Hadoop's S3A `mkdirs` writes:
        a prefix with no object under it does not exist, and Spark's file source
        refuses to stream from a folder that does not exist (bronze's manifests
        before the first landing file)."""
        self._fs.create_dir(self._arrow, recursive=True)

    def write_bytes(self, data: bytes) -> int:
        with self._fs.open_output_stream(self._arrow) as stream:
            stream.write(data)
        return len(data)

    def write_text(self, text: str, encoding: str = "utf-8") -> int:
        return self.write_bytes(text.encode(encoding))

    @contextlib.contextmanager
    def open_write(self) -> Iterator[IO[bytes]]:
        """A stream that becomes the object when it closes, and never if the writing
        fails: spooled in a local temporary file (constant memory), then uploaded (in
        parts when large)."""
        with tempfile.TemporaryFile() as spool:
            yield spool
            spool.seek(0)
            with self._fs.open_output_stream(self._arrow) as stream:
                stream.upload(spool)

    def unlink(self, missing_ok: bool = False, if_match: str | None = None) -> None:
        if if_match is not None:
            with _conditional_request():
                self._client.delete_object(Bucket=self.bucket, Key=self.key, IfMatch=if_match)
            return
        try:
            self._fs.delete_file(self._arrow)
        except FileNotFoundError:
            if not missing_ok:
                raise

    def remove_tree(self) -> None:
        """Delete every object under this prefix, folder markers (keys ending in /) too:
        Hadoop's S3A may leave some, and Spark takes a marker for a folder that exists."""
        if not self.key:  # the whole bucket's objects, never the bucket
            self._fs.delete_dir_contents(self.bucket, missing_dir_ok=True)
            return
        with contextlib.suppress(FileNotFoundError):
            self._fs.delete_dir(self._arrow)

    def move_tree(self, target: S3Path) -> None:
        """Copy every object under this prefix to `target` (same relative keys), then delete."""
        for path, _ in self.objects():
            self._fs.copy_file(path._arrow, (target / path.relative_to(self))._arrow)
        self.remove_tree()

    # -- the writer lock's conditional writes (boto3) -------------------------
    @property
    def _client(self) -> Any:
        return self.connection.client()

    def read_with_etag(self) -> tuple[bytes, str]:
        """The object's content and its ETag (for a later conditional write)."""
        from botocore.exceptions import ClientError

        try:
            answer = self._client.get_object(Bucket=self.bucket, Key=self.key)
        except ClientError as error:
            if error.response["Error"]["Code"] in ("404", "NoSuchKey"):
                raise FileNotFoundError(str(self)) from None
            raise
        return answer["Body"].read(), answer["ETag"]

    def put(self, data: bytes, if_none_match: bool = False, if_match: str | None = None) -> str:
        """Write the object, optionally only if absent or unchanged; its new ETag.

        Raises `PreconditionFailedError` when the condition does not hold.
        """
        conditions: dict[str, str] = {}
        if if_none_match:
            conditions["IfNoneMatch"] = "*"
        if if_match:
            conditions["IfMatch"] = if_match
        with _conditional_request():
            answer = self._client.put_object(
                Bucket=self.bucket, Key=self.key, Body=data, **conditions
            )
        return str(answer["ETag"])


class ObjectStream:
    """An object's input stream whose failures are the store's (`ObjectStoreError`)."""

    def __init__(self, path: S3Path, stream: Any) -> None:
        self.path, self.stream = path, stream

    def read(self, size: int = -1) -> bytes:
        with _store_errors(self.path):
            return bytes(self.stream.read() if size < 0 else self.stream.read(size))

    def seek(self, offset: int, whence: int = 0, /) -> int:
        """What gzip asks of a file object; pyarrow's input stream cannot seek."""
        return int(self.stream.seek(offset, whence))

    def close(self) -> None:
        self.stream.close()

    def __enter__(self) -> ObjectStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def _store_errors(path: S3Path) -> Iterator[None]:
    """pyarrow's `OSError`s as `ObjectStoreError`s, but for a missing object."""
    try:
        yield
    except FileNotFoundError:
        raise
    except OSError as error:
        raise ObjectStoreError(f"reading {path} from the object store failed: {error}") from error


@contextlib.contextmanager
def _conditional_request() -> Iterator[None]:
    """Turns S3's 412 (and a conflicting concurrent write's 409) into `PreconditionFailedError`."""
    from botocore.exceptions import ClientError

    try:
        yield
    except ClientError as error:
        code = error.response["Error"]["Code"]
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412):
            raise PreconditionFailedError(str(error)) from error
        raise


def _stat(info: pafs.FileInfo) -> ObjectStat:
    return ObjectStat(int(info.size), info.mtime_ns / 1e9, int(info.mtime_ns))


def is_object_store_uri(root: str) -> bool:
    return "://" in root and not root.startswith("file:")


def write_atomically(path: Root, data: str | bytes, durable: bool = True) -> None:
    """Readers see the old content or the new, never part of it.

    Locally: written beside under a hidden name (Spark's file source skips
    those), then renamed. `durable`: the content is on disk (fsync) before
    the rename, and the rename after it (fsync of the folder), so a power
    loss leaves the old file or the new one, never an empty one in its
    place; about 2.5 ms a file. On S3 a PUT is atomic and durable already.
    """
    payload = data.encode() if isinstance(data, str) else data
    if isinstance(path, S3Path):
        path.write_bytes(payload)
        return
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "wb") as file:
        file.write(payload)
        if durable:
            file.flush()
            os.fsync(file.fileno())
    temporary.replace(path)
    if durable:
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


def newest_change(path: Root) -> float:
    """When anything in a folder (or the file itself) last changed, in epoch seconds."""
    if isinstance(path, S3Path):
        return max((stat.st_mtime for _, stat in path.objects()), default=0.0)
    return path.stat().st_mtime


def relative(path: Root, root: Root) -> str:
    """`path` under `root`, as a relative name for messages."""
    return str(path)[len(str(root)) :].lstrip("/")


def remove_tree(path: Root) -> None:
    if isinstance(path, S3Path):
        path.remove_tree()
    else:
        shutil.rmtree(path, ignore_errors=True)


def move_tree(source: Root, target: Root) -> None:
    """Move a folder (a checkpoint) to `target` under the same root."""
    if isinstance(source, S3Path) and isinstance(target, S3Path):
        source.move_tree(target)
    elif isinstance(source, Path) and isinstance(target, Path):
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(source, target)
    else:
        raise ValueError(f"cannot move {source} to {target}: not on the same storage")


def path_of_uri(uri: str) -> str:
    """The path a Spark file URI names (`file:/a%20b`, `s3a://bucket/key`), as str() of a
    `Root` writes it: a local path, or an s3a URI with its key unquoted."""
    parsed = urlparse(uri)
    if parsed.scheme in ("s3a", "s3"):
        return f"s3a://{parsed.netloc}{unquote(parsed.path)}"
    return unquote(parsed.path)


def location(text: str, like: Root) -> Root:
    """A path written down as text (in a sidecar, a manifest) back as a path of `like`'s kind."""
    if isinstance(like, S3Path):
        return S3Path.from_uri(text, like.connection)
    return Path(text)


# A data root and every path under it: a local folder, or a prefix in an S3 bucket.
# Both offer the part of pathlib's interface the pipeline uses; str() is what Spark takes.
Root = Path | S3Path

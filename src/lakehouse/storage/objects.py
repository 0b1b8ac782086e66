"""A data root on object storage: `s3a://bucket/prefix` (docs/object-storage.md).

Spark reaches such a root through Hadoop's S3A connector (`s3a://`); Delta's
Python reader (`deltalake`) and our own bookkeeping (landing listings,
manifests, checkpoint guards, the writer lock) through the S3 API with boto3.
`S3Path` gives the second the part of `pathlib.Path`'s interface the pipeline
uses, so code that reads and writes small files under the data root works on
either kind of root: `str()` of an `S3Path` is the `s3a://` URI Spark takes.

S3 has no folders: a "folder" is a key prefix, which exists while some key
starts with it; `mkdir` writes an empty marker object (`<key>/`), as Hadoop
does. A PUT replaces an object whole, so writing is atomic without a rename.
Connection settings come from the standard AWS variables, read once by
`lakehouse.runtime.settings`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fnmatch
import functools
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NamedTuple
from urllib.parse import unquote, urlparse

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
        return _client(self)

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
            max_pool_connections=32,
        ),
    )


class ObjectStat(NamedTuple):
    st_size: int
    st_mtime: float
    st_mtime_ns: int


class PreconditionFailedError(Exception):
    """A conditional write or delete found the object not as expected (HTTP 412)."""


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

    # -- reading -------------------------------------------------------------
    @property
    def _client(self) -> Any:
        return self.connection.client()

    def _prefix(self) -> str:
        return f"{self.key}/" if self.key else ""

    def is_file(self) -> bool:
        return self._head() is not None

    def is_dir(self) -> bool:
        answer = self._client.list_objects_v2(Bucket=self.bucket, Prefix=self._prefix(), MaxKeys=1)
        return bool(answer.get("KeyCount"))

    def exists(self) -> bool:
        return self.is_file() or self.is_dir()

    def _head(self) -> dict[str, Any] | None:
        from botocore.exceptions import ClientError

        if not self.key:
            return None
        try:
            return dict(self._client.head_object(Bucket=self.bucket, Key=self.key))
        except ClientError as error:
            if error.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
                return None
            raise

    def stat(self) -> ObjectStat:
        head = self._head()
        if head is None:
            raise FileNotFoundError(str(self))
        return _stat(head["ContentLength"], head["LastModified"])

    def objects(self) -> Iterator[tuple[S3Path, ObjectStat]]:
        """Every object under this prefix, at any depth (folder markers left out)."""
        pages = self._client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self._prefix()
        )
        for page in pages:
            for item in page.get("Contents", []):
                if not item["Key"].endswith("/"):
                    yield (
                        S3Path(self.bucket, item["Key"], self.connection),
                        _stat(item["Size"], item["LastModified"]),
                    )

    def listing(self) -> tuple[list[tuple[S3Path, ObjectStat]], list[S3Path]]:
        """One level under this prefix: its objects with their sizes, and its sub-prefixes."""
        files: list[tuple[S3Path, ObjectStat]] = []
        folders: list[S3Path] = []
        pages = self._client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self._prefix(), Delimiter="/"
        )
        for page in pages:
            for item in page.get("Contents", []):
                if item["Key"] != self._prefix():  # the prefix's own folder marker
                    files.append(
                        (
                            S3Path(self.bucket, item["Key"], self.connection),
                            _stat(item["Size"], item["LastModified"]),
                        )
                    )
            for common in page.get("CommonPrefixes", []):
                folders.append(S3Path(self.bucket, common["Prefix"].rstrip("/"), self.connection))
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
        return bytes(self.open_binary().read())

    def read_text(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return self.read_bytes().decode(encoding, errors)

    def read_with_etag(self) -> tuple[bytes, str]:
        """The object's content and its ETag (for a later conditional write)."""
        answer = self._get()
        return answer["Body"].read(), answer["ETag"]

    def open_binary(self) -> IO[bytes]:
        """The object as a stream, read as it is consumed (constant memory)."""
        body: IO[bytes] = self._get()["Body"]
        return body

    def _get(self) -> dict[str, Any]:
        from botocore.exceptions import ClientError

        try:
            return dict(self._client.get_object(Bucket=self.bucket, Key=self.key))
        except ClientError as error:
            if error.response["Error"]["Code"] in ("404", "NoSuchKey"):
                raise FileNotFoundError(str(self)) from None
            raise

    # -- writing -------------------------------------------------------------
    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """An empty folder marker (the key and a slash), as Hadoop's S3A `mkdirs` writes:
        a prefix with no object under it does not exist, and Spark's file source
        refuses to stream from a folder that does not exist (bronze's manifests
        before the first landing file)."""
        self._client.put_object(Bucket=self.bucket, Key=self._prefix(), Body=b"")

    def write_bytes(self, data: bytes) -> int:
        self._client.put_object(Bucket=self.bucket, Key=self.key, Body=data)
        return len(data)

    def write_text(self, text: str, encoding: str = "utf-8") -> int:
        return self.write_bytes(text.encode(encoding))

    @contextlib.contextmanager
    def open_write(self) -> Iterator[IO[bytes]]:
        """A stream that becomes the object when it closes: spooled in a local temporary
        file (constant memory), then uploaded (in parts when large)."""
        with tempfile.TemporaryFile() as spool:
            yield spool
            spool.seek(0)
            self._client.upload_fileobj(spool, self.bucket, self.key)

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

    def unlink(self, missing_ok: bool = False, if_match: str | None = None) -> None:
        if not missing_ok and not self.is_file():
            raise FileNotFoundError(str(self))
        with _conditional_request():
            conditions = {"IfMatch": if_match} if if_match else {}
            self._client.delete_object(Bucket=self.bucket, Key=self.key, **conditions)

    def remove_tree(self) -> None:
        """Delete every object under this prefix, folder markers (keys ending in /) too:
        Hadoop's S3A may leave some, and Spark takes a marker for a folder that exists."""
        pages = self._client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self._prefix()
        )
        keys = [{"Key": item["Key"]} for page in pages for item in page.get("Contents", [])]
        keys += [{"Key": self.key + "/"}] if self.key else []  # the prefix's own marker
        for start in range(0, len(keys), 1000):
            self._client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": keys[start : start + 1000], "Quiet": True}
            )

    def move_tree(self, target: S3Path) -> None:
        """Copy every object under this prefix to `target` (same relative keys), then delete."""
        for path, _ in self.objects():
            destination = target / path.relative_to(self)
            self._client.copy_object(
                Bucket=destination.bucket,
                Key=destination.key,
                CopySource={"Bucket": path.bucket, "Key": path.key},
            )
        self.remove_tree()


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


def _stat(size: int, modified: dt.datetime) -> ObjectStat:
    seconds = modified.timestamp()
    return ObjectStat(int(size), seconds, round(seconds * 1_000_000) * 1000)


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

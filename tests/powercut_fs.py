"""A FUSE file system that loses power: what the storage code made durable survives, the rest goes.

Every operation passes through to a backing directory. Beside it the file system keeps what a
disk would still hold after a power cut, as POSIX defines it:

- a file's content as of its last fsync or fdatasync (writes through a shared mmap reach the
  file system as ``write`` calls when the kernel writes the pages back: msync and fsync do that
  first, then send the fsync);
- a directory's entries as of its last fsync: a created, renamed or unlinked name is durable
  only once its directory is fsynced (no journal that happens to order it for us).

``PowerCutFS.cut()`` freezes the file system between two operations (every later call on the
old mount fails with EIO), rebuilds the backing directory to the durable state, optionally with
a random subset of the unsynced page writes kept as a disk might (to catch code that trusts
write order without a barrier), and mounts it again, fresh, at the same place.

The server runs in its own process (``python tests/powercut_fs.py BACKING MOUNT SHADOW``),
talking over stdin/stdout: ``freeze`` (the cut: answers ``frozen``), ``restore KEEP SEED``
(answers ``cut N``, then ``mounted`` when the durable state is mounted again) and ``quit``.
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

PAGE_SIZE = 4096
FUSE_CONNECTIONS = Path("/sys/fs/fuse/connections")  # fusectl: where a connection is ended

# --- the client side: used by tests and bench --------------------------------------------------


def fuse_missing_reason() -> str | None:
    """Why the power-cut file system cannot run here, or None when it can."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if shutil.which("fusermount3") is None:
        return "no fusermount3 (Debian's fuse3)"
    if not FUSE_CONNECTIONS.is_dir():
        return f"no {FUSE_CONNECTIONS} to end a mount's connection with"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as error:
        return f"no libfuse binding (mfusepy with libfuse3): {error}"
    return None


class PowerCutFS:
    """A power-cut file system mounted at ``mount`` over ``backing`` (see the module doc)."""

    def __init__(self, backing: Path, mount: Path, shadow: Path) -> None:
        self.backing = backing
        self.mount = mount
        self.shadow = shadow
        self.cuts = 0
        self._process: subprocess.Popen[str] | None = None

    def __enter__(self) -> PowerCutFS:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        for directory in (self.backing, self.mount, self.shadow):
            directory.mkdir(parents=True, exist_ok=True)
        self._server_log = open(self.shadow.with_name(self.shadow.name + ".log"), "ab")
        self._process = subprocess.Popen(
            [sys.executable, __file__, str(self.backing), str(self.mount), str(self.shadow)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._server_log,
            text=True,
            bufsize=1,
        )
        self._expect("mounted")

    def cut(
        self,
        keep_unsynced: float = 0.0,
        seed: int = 0,
        abandon: Callable[[], object] | None = None,
    ) -> None:
        """Lose power now: everything not durable goes (but for a ``keep_unsynced`` share of
        the unsynced page writes, drawn with ``seed``), and the durable state is mounted again.

        From the cut on, every change through the old mount fails with EIO; reads still work
        until ``abandon`` (which lets go of whatever used the old mount: stops its threads,
        closes its files) returns, so a memory map of the old mount faults no SIGBUS meanwhile.
        Then the old mount's connection ends (ENOTCONN for what still holds it)."""
        self._send("freeze")
        self._expect("frozen")
        if abandon is not None:
            abandon()
        self._send(f"restore {keep_unsynced} {seed}")
        self._expect("cut")
        self._expect("mounted")
        self.cuts += 1

    def stop(self) -> None:
        """Unmount with nothing lost (a clean stop, not a cut)."""
        if self._process is None:
            return
        process, self._process = self._process, None
        self._server_log.close()
        try:
            process.stdin.write("quit\n")  # type: ignore[union-attr]
            process.stdin.flush()  # type: ignore[union-attr]
            process.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()
            subprocess.run(["fusermount3", "-u", "-z", str(self.mount)], check=False)

    def _send(self, line: str) -> None:
        assert self._process is not None and self._process.stdin is not None
        self._process.stdin.write(line + "\n")
        self._process.stdin.flush()

    def _expect(self, word: str) -> str:
        assert self._process is not None and self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line.startswith(word):
            raise RuntimeError(f"power-cut file system said {line!r}, expected {word!r}")
        return line


# --- the server side ----------------------------------------------------------------------------


@dataclass
class _Dirty:
    """A file's changes since its last fsync."""

    reader: int  # a read descriptor on the backing inode (works after an unlink too)
    min_size: int  # smallest size the file had since the fsync (a truncation to cut back)
    pages: set[int] = field(default_factory=set)  # pages written since the fsync


class DurabilityTracker:
    """What survives a power cut: per directory node its durable entries, per file node its
    durable content (a shadow file). Node ids are ours: the backing file system reuses inode
    numbers, and a durable name may outlive its inode's last live link."""

    def __init__(self, root: Path, shadow: Path) -> None:
        self.root = root
        self.shadow = shadow
        self._next_node = 1
        self.by_ino: dict[int, int] = {}
        self.durable_dirs: dict[int, dict[str, int]] = {}
        self.dirty: dict[int, _Dirty] = {}
        self.root_node = self._scan(root)

    def _new_node(self, ino: int) -> int:
        node = self._next_node
        self._next_node += 1
        self.by_ino[ino] = node
        return node

    def _shadow_path(self, node: int) -> str:
        return os.path.join(self.shadow, str(node))

    def _scan(self, path: Path) -> int:
        """Take an existing tree as durable (the state at mount time)."""
        node = self._new_node(os.lstat(path).st_ino)
        entries = {}
        for entry in os.scandir(path):
            if entry.is_dir(follow_symlinks=False):
                entries[entry.name] = self._scan(Path(entry.path))
            else:
                child = self._new_node(entry.inode())
                shutil.copyfile(entry.path, self._shadow_path(child))
                entries[entry.name] = child
        self.durable_dirs[node] = entries
        return node

    # --- events from the operations ---

    def created_file(self, ino: int) -> int:
        node = self._new_node(ino)
        open(self._shadow_path(node), "wb").close()
        return node

    def created_dir(self, ino: int) -> int:
        node = self._new_node(ino)
        self.durable_dirs[node] = {}
        return node

    def node_of(self, ino: int) -> int:
        return self.by_ino[ino]

    def _dirty(self, node: int, fd: int) -> _Dirty:
        dirty = self.dirty.get(node)
        if dirty is None:
            reader = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY)
            dirty = _Dirty(reader, os.fstat(reader).st_size)
            self.dirty[node] = dirty
        return dirty

    def wrote(self, node: int, fd: int, offset: int, length: int) -> None:
        if length > 0:
            pages = self._dirty(node, fd).pages
            pages.update(range(offset // PAGE_SIZE, (offset + length - 1) // PAGE_SIZE + 1))

    def resizing(self, node: int, fd: int, new_size: int) -> None:
        """Call before a truncate or an O_TRUNC open."""
        dirty = self._dirty(node, fd)
        dirty.min_size = min(dirty.min_size, new_size)

    def synced_file(self, node: int) -> None:
        dirty = self.dirty.pop(node, None)
        if dirty is None:
            return
        try:
            self._copy_pages(node, dirty, dirty.pages, grow=False)
        finally:
            os.close(dirty.reader)

    def _copy_pages(self, node: int, dirty: _Dirty, pages: Iterable[int], grow: bool) -> None:
        """Copy ``pages`` of the live file into the durable one: every page and the size for an
        fsync; for pages a disk kept by chance (``grow``), the size only reaches past them."""
        size = os.fstat(dirty.reader).st_size
        shadow = os.open(self._shadow_path(node), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            durable_size = os.fstat(shadow).st_size
            if not grow:
                os.ftruncate(shadow, min(dirty.min_size, durable_size))
            for page in sorted(pages):
                data = os.pread(dirty.reader, PAGE_SIZE, page * PAGE_SIZE)
                if data:
                    os.pwrite(shadow, data, page * PAGE_SIZE)
                    durable_size = max(durable_size, page * PAGE_SIZE + len(data))
            os.ftruncate(shadow, durable_size if grow else size)
        finally:
            os.close(shadow)

    def synced_dir(self, node: int, path: str) -> None:
        entries = {}
        for entry in os.scandir(path):
            ino = entry.inode()
            if ino not in self.by_ino:
                raise OSError(errno.EIO, f"untracked entry {entry.path}")
            entries[entry.name] = self.by_ino[ino]
        self.durable_dirs[node] = entries

    # --- the power cut ---

    def keep_some_unsynced(self, share: float, rng: random.Random) -> int:
        """Make a random ``share`` of the unsynced page writes durable, as a disk may; the
        count kept."""
        kept = 0
        for node, dirty in self.dirty.items():
            pages = [page for page in sorted(dirty.pages) if rng.random() < share]
            if pages:
                self._copy_pages(node, dirty, pages, grow=True)
                kept += len(pages)
        return kept

    def rebuild(self) -> None:
        """Replace the backing tree with the durable one."""
        for dirty in self.dirty.values():
            os.close(dirty.reader)
        self.dirty.clear()
        for entry in os.scandir(self.root):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        placed: dict[int, str] = {self.root_node: str(self.root)}
        self.by_ino = {os.lstat(self.root).st_ino: self.root_node}
        self._place(self.root_node, str(self.root), placed)
        live_dirs = {node: self.durable_dirs[node] for node in placed if node in self.durable_dirs}
        self.durable_dirs = live_dirs
        for name in os.listdir(self.shadow):
            if int(name) not in placed:
                os.unlink(os.path.join(self.shadow, name))

    def _place(self, dir_node: int, path: str, placed: dict[int, str]) -> None:
        entries = self.durable_dirs[dir_node]
        for name, node in list(entries.items()):
            target = os.path.join(path, name)
            if node in placed:
                if node in self.durable_dirs:
                    del entries[name]  # a directory durable under two names keeps its first
                else:
                    os.link(placed[node], target)
                continue
            if node in self.durable_dirs:
                os.mkdir(target)
                placed[node] = target
                self._place(node, target, placed)
            else:
                shutil.copyfile(self._shadow_path(node), target)
                placed[node] = target
            self.by_ino[os.lstat(target).st_ino] = node


def _abort_and_unmount(mount: Path) -> None:  # pragma: no cover - subprocess
    """End the mount's FUSE connection at once, as power loss would: requests in flight and
    every later call on files still open there fail (ENOTCONN), their dirty pages are dropped,
    and the serving loop returns even while other processes hold files open."""
    if not any(FUSE_CONNECTIONS.iterdir()):
        subprocess.run(["mount", "-t", "fusectl", "fusectl", str(FUSE_CONNECTIONS)], check=False)
    device = None
    with open("/proc/self/mountinfo") as mounts:
        for line in mounts:
            fields = line.split()
            if fields[4] == str(mount):
                major, minor = map(int, fields[2].split(":"))
                device = (major << 20) | minor
    if device is not None:
        try:
            (FUSE_CONNECTIONS / str(device) / "abort").write_text("1")
        except OSError:
            pass
    subprocess.run(["fusermount3", "-u", "-z", str(mount)], check=False, stderr=subprocess.DEVNULL)


def _serve(backing: Path, mount: Path, shadow: Path) -> None:  # pragma: no cover - subprocess
    import mfusepy

    tracker = DurabilityTracker(backing, shadow)
    lock = threading.RLock()
    state = {"frozen": False, "quit": False, "cuts": 0}
    say_lock = threading.Lock()

    def say(line: str) -> None:
        with say_lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def guarded(method):
        """A change: refused once the power is cut."""

        def run(self, *args):
            with lock:
                if state["frozen"]:
                    raise OSError(errno.EIO, "power cut")
                return method(self, *args)

        run.__name__ = method.__name__
        return run

    def reading(method):
        """A read: served until the old mount ends, so maps of it never fault."""

        def run(self, *args):
            with lock:
                return method(self, *args)

        run.__name__ = method.__name__
        return run

    class PowerCutOperations(mfusepy.Operations):
        use_ns = True

        def __init__(self) -> None:
            self.handles: dict[int, tuple[int, int]] = {}  # fh -> (backing fd, node)
            self.next_handle = 1

        def _path(self, path: str) -> str:
            return str(backing) + path

        def _handle(self, fd: int, node: int) -> int:
            handle = self.next_handle
            self.next_handle += 1
            self.handles[handle] = (fd, node)
            return handle

        def close_all(self) -> None:
            for fd, _node in self.handles.values():
                os.close(fd)
            self.handles.clear()

        def init(self, path: str) -> None:
            with lock:
                state["frozen"] = False
            say("mounted")

        @reading
        def getattr(self, path, fh=None):
            if fh is not None and fh in self.handles:
                st = os.fstat(self.handles[fh][0])
            else:
                st = os.lstat(self._path(path))
            return {
                "st_mode": st.st_mode,
                "st_nlink": st.st_nlink,
                "st_size": st.st_size,
                "st_uid": st.st_uid,
                "st_gid": st.st_gid,
                "st_atime": st.st_atime_ns,
                "st_mtime": st.st_mtime_ns,
                "st_ctime": st.st_ctime_ns,
                "st_blocks": st.st_blocks,
                "st_blksize": st.st_blksize,
            }

        @reading
        def readdir(self, path, fh):
            return [".", "..", *os.listdir(self._path(path))]

        @reading
        def statfs(self, path):
            sv = os.statvfs(self._path(path))
            return {key: getattr(sv, key) for key in dir(sv) if key.startswith("f_")}

        @guarded
        def chmod(self, path, mode):
            os.chmod(self._path(path), mode)

        @guarded
        def chown(self, path, uid, gid):
            os.chown(self._path(path), uid, gid)

        @guarded
        def utimens(self, path, times=None):
            os.utime(self._path(path), ns=times)

        @guarded
        def mkdir(self, path, mode):
            real = self._path(path)
            os.mkdir(real, mode)
            tracker.created_dir(os.lstat(real).st_ino)

        @guarded
        def rmdir(self, path):
            os.rmdir(self._path(path))

        @guarded
        def unlink(self, path):
            os.unlink(self._path(path))

        @guarded
        def rename(self, old, new):
            os.rename(self._path(old), self._path(new))

        @guarded
        def link(self, target, source):
            os.link(self._path(source), self._path(target))

        @guarded
        def create(self, path, mode, flags=os.O_RDWR):
            real = self._path(path)
            fd = os.open(real, os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)
            return self._handle(fd, tracker.created_file(os.fstat(fd).st_ino))

        @reading
        def open(self, path, flags):
            real = self._path(path)
            node = tracker.node_of(os.lstat(real).st_ino)
            if flags & os.O_TRUNC and state["frozen"]:
                raise OSError(errno.EIO, "power cut")
            keep = flags & (os.O_APPEND | os.O_TRUNC | os.O_SYNC | os.O_DSYNC)
            fd = os.open(real, os.O_RDWR | (keep & ~os.O_TRUNC))
            if flags & os.O_TRUNC:
                tracker.resizing(node, fd, 0)
                os.ftruncate(fd, 0)
            return self._handle(fd, node)

        @reading
        def read(self, path, size, offset, fh):
            return os.pread(self.handles[fh][0], size, offset)

        @guarded
        def write(self, path, data, offset, fh):
            fd, node = self.handles[fh]
            written = os.pwrite(fd, data, offset)
            tracker.wrote(node, fd, offset, written)
            return written

        @guarded
        def truncate(self, path, length, fh=None):
            fd = os.open(self._path(path), os.O_RDWR)
            try:
                tracker.resizing(tracker.node_of(os.fstat(fd).st_ino), fd, length)
                os.ftruncate(fd, length)
            finally:
                os.close(fd)

        @guarded
        def fallocate(self, path, mode, offset, size, fh):
            fd, node = self.handles[fh]
            if mode != 0:
                raise OSError(errno.EOPNOTSUPP, "only plain fallocate")
            tracker.resizing(node, fd, os.fstat(fd).st_size)
            os.posix_fallocate(fd, offset, size)

        @reading
        def flush(self, path, fh):
            return 0

        def release(self, path, fh):
            with lock:
                entry = self.handles.pop(fh, None)
                if entry is not None:
                    os.close(entry[0])
            return 0

        @guarded
        def fsync(self, path, datasync, fh):
            tracker.synced_file(self.handles[fh][1])

        @guarded
        def fsyncdir(self, path, datasync, fh):
            real = self._path(path)
            tracker.synced_dir(tracker.node_of(os.lstat(real).st_ino), real)

    operations = PowerCutOperations()

    def control() -> None:
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            if words[0] == "freeze":
                with lock:
                    state["frozen"] = True
                say("frozen")
                continue
            if words[0] == "restore":
                share, seed = float(words[1]), int(words[2])
                with lock:
                    state["frozen"] = True
                    kept = tracker.keep_some_unsynced(share, random.Random(seed)) if share else 0
                    operations.close_all()
                    tracker.rebuild()
                    state["cuts"] += 1
                say(f"cut {state['cuts']} kept={kept}")
            elif words[0] == "quit":
                state["quit"] = True
            else:
                continue
            _abort_and_unmount(mount)
            unmounted.set()
            if state["quit"]:
                return
        state["quit"] = True
        _abort_and_unmount(mount)
        unmounted.set()

    unmounted = threading.Event()
    threading.Thread(target=control, daemon=True).start()
    while not state["quit"]:
        unmounted.clear()
        mfusepy.FUSE(operations, str(mount), foreground=True, fsname="powercut", hard_remove=True)
        unmounted.wait()


if __name__ == "__main__":
    _serve(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))

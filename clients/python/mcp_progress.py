"""Publish a job's progress to the mcp-progress daemon, so that the MCP host
that started the job (Claude Code, Cursor, ...) shows a live progress bar.

One file, standard library only, Python >= 3.8: drop it next to your script.

    from mcp_progress import Progress

    with Progress() as p:                 # token and socket from the environment
        for step in range(1, 101):
            p.update(step, total=100, message=f"step {step}")
    # done is sent on exit: "ok", "error" on an exception, "cancelled" when cancelled

    # or, in an existing training loop, change one line:
    from mcp_progress import tqdm         # was: from tqdm import tqdm

The token and the socket come from $MCP_PROGRESS_TOKEN and
$MCP_PROGRESS_SOCKET (``mcp-progress run`` and the MCP relay helper set both).
On Windows the socket is the daemon's named pipe, which Python has no AF_UNIX
for: it is opened as a file (PeekNamedPipe tells the reader what is there).
Without a token every call is a no-op, so the same script runs anywhere.

Nothing here can hurt the job: all socket work happens on a background
thread, ``update()`` only records the newest value (a tight loop costs little),
and transport trouble (no daemon, a daemon restart) becomes a warning on the
``mcp_progress`` logger, never an exception. Each warning's record carries a
``code`` attribute: the daemon's code when it refused a frame (``invalid_utf8``,
``non_monotonic``, ...; docs/PROTOCOL.md 2.5), else the client's own
(``daemon_not_running``, ``daemon_disconnected``, ...), for a handler to act on
without reading the message. The protocol is docs/PROTOCOL.md.
"""
from __future__ import annotations

import atexit
import errno
import json
import logging
import math
import os
import random
import re
import select
import socket as _socket
import stat
import sys
import tempfile
import threading
import time
import traceback
import weakref
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

__all__ = ["Progress", "Cancelled", "tqdm", "attach", "default_progress"]
__version__ = "0.1.0"

ENV_SOCKET = "MCP_PROGRESS_SOCKET"
ENV_TOKEN = "MCP_PROGRESS_TOKEN"
ENV_RUNTIME_DIR = "MCP_PROGRESS_RUNTIME_DIR"
PROTOCOL_VERSION = 1
MAX_MESSAGE_BYTES = 4096
# The daemon's limits (src/protocol/limits.ts): a string token's UTF-8 bytes, and the largest
# magnitude of a number it takes (2^53 - 1: exact in a double, an int64 and a JavaScript number).
MAX_TOKEN_BYTES = 1024
MAX_SAFE_NUMBER = 2**53 - 1
FORM_FEED = b"\x0c"
# Reconnect waits (src/shared/defaults.ts RECONNECT_BACKOFF and backoffDelayMs): 50 ms doubling
# to 2 s, of which a random half is taken off, so that the many workers a daemon restart drops
# at once do not all come back in the same millisecond. Every lost connection waits its step before
# the next connect, as a failed connect does: a socket that closes each connection is not called on
# in a tight loop.
BACKOFF_FIRST_SECONDS = 0.05
BACKOFF_MAX_SECONDS = 2.0


def backoff_delay(attempt: int, rand: Callable[[], float] = random.random) -> float:
    """The wait before retry ``attempt`` (0-based): between half the step and the step."""
    step = min(BACKOFF_MAX_SECONDS, BACKOFF_FIRST_SECONDS * 2 ** min(max(0, attempt), 30))
    return step / 2 + rand() * step / 2


#: How long done() waits for a first connection when the client never had one (no daemon runs).
NEVER_CONNECTED_GRACE_SECONDS = 0.25
# A done refused journal_failed (the daemon's journal could not take it; it was not applied) is
# sent again after this long while the done timeout allows (src/shared/defaults.ts JOURNAL_RETRY_MS).
JOURNAL_RETRY_SECONDS = 0.25
#: Framing errors that refuse what a frame holds: the daemon closes the connection, and
#: the frame, sent again, would be refused again, so it is not (docs/PROTOCOL.md). The same
#: set as REFUSED_FRAME_CODES in src/client/done-answers.ts (test/unit/refused-frame-codes.test.ts).
REFUSED_FRAME_CODES = frozenset(("invalid_utf8", "invalid_json", "invalid_envelope", "reserved_event", "frame_too_large"))

Token = Union[str, int]
CancelCallback = Callable[[Optional[str]], None]

log = logging.getLogger("mcp_progress")


class Cancelled(KeyboardInterrupt):
    """Raised by the tqdm adapter when a gateway cancelled the stream.

    A KeyboardInterrupt, so that ``except Exception`` in a training loop does
    not swallow it and frameworks that shut down gracefully on Ctrl-C do so.
    """


def default_socket_path(env: Optional[Dict[str, str]] = None) -> str:
    """$MCP_PROGRESS_SOCKET, else <runtime dir>/bridge.sock (the daemon's own rules)."""
    env = os.environ if env is None else env
    if env.get(ENV_SOCKET):
        return env[ENV_SOCKET]
    runtime_dir = env.get(ENV_RUNTIME_DIR)
    if runtime_dir and not os.path.isabs(runtime_dir):
        # Relative, the socket would depend on each process's working directory (as in the daemon).
        raise ValueError(
            "$%s is %s, a relative path: every process would look for the daemon somewhere else, "
            "by its working directory. Set it to an absolute path, such as %s"
            % (ENV_RUNTIME_DIR, json.dumps(runtime_dir), json.dumps(os.path.abspath(runtime_dir)))
        )
    if not runtime_dir:
        xdg = env.get("XDG_RUNTIME_DIR")
        if xdg:
            runtime_dir = os.path.join(xdg, "mcp-progress")
        else:
            user = str(os.getuid()) if hasattr(os, "getuid") else "user"
            runtime_dir = os.path.join(tempfile.gettempdir(), "mcp-progress-" + user)
    return os.path.join(runtime_dir, "bridge.sock")


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _fit_message(text: str) -> str:
    """The message as a frame can carry it: well-formed, since the daemon refuses a lone
    surrogate (a name decoded with surrogateescape holds one for each byte that is not UTF-8),
    each becoming U+FFFD; and at most MAX_MESSAGE_BYTES of UTF-8."""
    text = _LONE_SURROGATE.sub("\ufffd", text)
    data = text.encode("utf-8")
    if len(data) <= MAX_MESSAGE_BYTES:
        return text
    return data[: MAX_MESSAGE_BYTES - 3].decode("utf-8", "ignore") + "..."


class Progress:
    """One progress stream. Use as a context manager, or call ``done()`` at the end.

    ``update()`` records the newest value; frames leave at most once per
    ``interval`` seconds (the first at once, the newest at the end of each
    interval), and ``done()`` sends the newest value first, so spaced updates
    are never lost. After a daemon restart the newest value is sent again.
    """

    def __init__(
        self,
        token: Optional[Token] = None,
        socket: Optional[str] = None,
        *,
        interval: float = 0.1,
        on_cancel: Optional[CancelCallback] = None,
        done_timeout: float = 5.0,
    ) -> None:
        if token is None:
            token = os.environ.get(ENV_TOKEN) or None
        problem = None if token is None else _token_problem(token)
        if problem is not None:
            # Every frame under it would be refused (invalid_token): progress is off instead.
            log.warning("mcp-progress: %s; progress is off", problem, extra={"code": "invalid_token"})
            token = None
        socket_path = socket
        if not socket_path:
            try:
                socket_path = default_socket_path()
            except ValueError as error:
                log.warning("mcp-progress: %s; progress is off", error)
                token, socket_path = None, ""
        self.token: Optional[Token] = token
        self.socket_path: str = socket_path
        #: Called (on the client's thread) with the reason when the stream is cancelled.
        self.on_cancel: Optional[CancelCallback] = on_cancel
        self._interval = max(0.0, float(interval))
        self._done_timeout = float(done_timeout)
        self._lock = threading.Lock()
        self._state = "open"  # open -> ending -> ended, or closed
        # The newest update as (progress, total, message), and whether it left on this connection.
        self._newest: Optional[Tuple[float, Optional[float], Optional[str]]] = None
        self._newest_sent = False
        self._last_progress: Optional[float] = None
        self._total: Optional[float] = None
        self._done_request: Optional[Dict[str, Any]] = None
        self._done_settled = threading.Event()
        self._delivered = False
        self._cancelled = False
        self._cancel_reason: Optional[str] = None
        self._idle = False
        self._warned: set = set()
        self._connected = False
        #: A connect found the daemon's queue of connects full (EAGAIN): a daemon runs.
        self._daemon_busy = False
        #: The daemon refused a frame of the current connection as malformed.
        self._refused = False
        #: Backoff steps taken since the last connection that was not refused, and when the next
        #: connect may be tried (time.monotonic()): a failed connect and a lost connection both wait.
        self._attempt = 0
        self._retry_at = 0.0
        self._thread: Optional[threading.Thread] = None
        self._wake_r: Any = None
        self._wake_w: Any = None
        if self.token is not None and not hasattr(_socket, "AF_UNIX") and os.name != "nt":
            self._warn("unsupported", "this platform has no Unix sockets; progress is off")
            self.token = None
        if self.token is not None:
            self._wake_r, self._wake_w = _wake_pair()
            self._thread = threading.Thread(target=self._run, name="mcp-progress", daemon=True)
            self._thread.start()
            _live.add(self)

    # The worker's side: cheap, never raises over transport trouble.

    @property
    def enabled(self) -> bool:
        """False without a token: every call is then a no-op."""
        return self.token is not None

    @property
    def connected(self) -> bool:
        return self._connected

    @property
    def cancelled(self) -> bool:
        """A gateway asked to cancel this stream; stop, and leave with done("cancelled")."""
        return self._cancelled

    @property
    def cancel_reason(self) -> Optional[str]:
        return self._cancel_reason

    def update(self, progress: Optional[float] = None, total: Optional[float] = None, message: Optional[str] = None) -> None:
        """Record an update. ``progress`` must exceed the last value (omitted: last + 1);
        ``total`` is remembered until another is given."""
        if self._state != "open" or self.token is None:
            return
        last = self._last_progress
        if progress is None:
            value = (last or 0) + 1
            if value > MAX_SAFE_NUMBER:  # the daemon's own count would pass it too (PROTOCOL 5.1)
                self._warn(
                    "non_monotonic",
                    "update ignored: progress %r is the largest there is (%d), so it cannot count one up: send done"
                    % (last, MAX_SAFE_NUMBER),
                )
                return
        elif not _safe_number(progress):
            self._warn(
                "invalid_field",
                "update ignored: progress must be a finite number within ±%d, got %r" % (MAX_SAFE_NUMBER, progress),
            )
            return
        elif last is not None and not progress > last:
            self._warn(
                "non_monotonic",
                "update ignored: progress %r is not greater than the last progress %r; "
                "MCP requires progress to increase (omit progress to count one up)" % (progress, last),
            )
            return
        else:
            value = progress
        if total is not None:
            if not _safe_number(total) or total < 0:
                self._warn(
                    "invalid_field",
                    "update ignored: total must be a finite number from 0 to %d, got %r" % (MAX_SAFE_NUMBER, total),
                )
                return
            self._total = total
        if message is not None and not isinstance(message, str):
            message = str(message)
        self._last_progress = value
        with self._lock:
            self._newest = (value, self._total, message)
            self._newest_sent = False
            if self._idle:
                self._idle = False
                self._wake()

    def done(self, status: str = "ok", message: Optional[str] = None) -> bool:
        """Send the newest update, then done; wait (at most ``done_timeout`` seconds,
        reconnecting if need be) for the daemon's ack. Returns whether it was delivered.

        The full ``done_timeout`` applies once the client has been connected (a daemon
        that went away may be restarting). A client that never reached a daemon tries
        once more and waits at most 0.25 s (NEVER_CONNECTED_GRACE_SECONDS): no daemon
        runs, and the job should not wait for one."""
        if self.token is None:
            return False
        if status not in ("ok", "error", "cancelled"):
            self._warn("invalid_field", "done status must be ok, error or cancelled, got %r; sending error" % (status,))
            status = "error"
        with self._lock:
            if self._state == "open":
                self._state = "ending"
                now = time.monotonic()
                request: Dict[str, Any] = {
                    "status": status,
                    "deadline": now + self._done_timeout,
                    "grace_deadline": now + min(self._done_timeout, NEVER_CONNECTED_GRACE_SECONDS),
                }
                if message is not None:
                    request["message"] = _fit_message(str(message))
                self._done_request = request
                self._wake()
            elif self._state == "closed":
                return False
        if threading.current_thread() is self._thread:
            return False  # called from on_cancel: the thread that would deliver it cannot wait for itself
        self._done_settled.wait(self._done_timeout + 1.0)
        return self._delivered

    def close(self) -> None:
        """Send the newest update and disconnect, without ending the stream."""
        with self._lock:
            if self._state in ("closed", "ended"):
                return
            ending = self._state == "ending"
            self._state = "closed"
            self._wake()
        if ending:
            self._done_settled.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(1.0)

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        """Sends done: "cancelled" after a cancel or a KeyboardInterrupt (``Cancelled``
        included); for ``sys.exit()`` "ok" when the code is 0 or None, else "error" with
        "exited with code N"; "error" with the exception for any other; else "ok"."""
        if self._state != "open":
            self.close()
            return False
        if self._cancelled or (exc_type is not None and issubclass(exc_type, KeyboardInterrupt)):
            self.done("cancelled", self._cancel_reason)
        elif exc_type is None:
            self.done("ok")
        elif issubclass(exc_type, SystemExit):
            # sys.exit() in the block: success is exit code 0 or None, as the shell sees it.
            code = getattr(exc, "code", None)
            if code is None or code is False or code == 0:
                self.done("ok")
            elif isinstance(code, int):
                self.done("error", "exited with code %d" % code)
            else:  # sys.exit("text") prints the text and exits with 1
                self.done("error", "exited with code 1: %s" % (code,))
        else:
            text = "".join(traceback.format_exception_only(exc_type, exc)).strip()
            self.done("error", text)
        return False

    def _warn(self, code: str, message: str, once: Optional[str] = None) -> None:
        """Logs `message` with its `code` on the record, once per `once` (default: the code)."""
        key = code if once is None else once
        if key in self._warned:
            return
        self._warned.add(key)
        log.warning("mcp-progress: %s", message, extra={"code": code})

    def _wake(self) -> None:
        if self._wake_w is None:
            return
        try:
            _wake_write(self._wake_w)
        except (BlockingIOError, OSError):
            pass  # the pipe is full, so the thread is awake anyway

    # The client's thread: connects, reconnects, throttles, sends, reads replies.

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as error:  # a bug here must not reach the job
            self._warn("internal", "the progress client stopped: %r" % (error,))
        finally:
            self._connected = False
            with self._lock:
                if self._state == "ending":
                    self._state = "ended"
            self._done_settled.set()
            # Forget the descriptors under the lock first: a reused number must never get our byte.
            with self._lock:
                ends = (self._wake_r, self._wake_w)
                self._wake_r = self._wake_w = None
            for end in ends:
                try:
                    end.close() if isinstance(end, _socket.socket) else os.close(end)
                except OSError:
                    pass

    def _loop(self) -> None:
        sock: Optional[_socket.socket] = None
        buffer = b""
        next_send_at = 0.0
        seq = 0
        resync_seq = -1
        done_seq = -1
        done_retried = False
        ever_connected = False  # only a client that was connected waits out the full done_timeout
        done_tried_at_once = False  # a done with no daemon reached yet tries once without waiting
        while True:
            now = time.monotonic()
            with self._lock:
                state = self._state
                done_request = self._done_request
                unsent = self._newest if self._newest is not None and not self._newest_sent else None
            if state == "closed":
                if sock is not None:
                    if unsent is not None:
                        self._send(sock, "progress", self._progress_data(unsent))
                    sock.close()
                return
            give_up_at = None
            if done_request is not None:
                # A daemon too busy to take the connect (EAGAIN) is a daemon: done waits for it in full.
                waits_in_full = ever_connected or self._daemon_busy
                give_up_at = done_request["deadline"] if waits_in_full else done_request["grace_deadline"]
            if give_up_at is not None and now >= give_up_at:
                if waits_in_full:
                    self._warn("daemon_unreachable", "done was not delivered within %.1f s (socket %s)" % (self._done_timeout, self.socket_path))
                else:
                    self._warn("daemon_unreachable", "done was not delivered: no daemon has answered on %s since the client started" % (self.socket_path,))
                self._finish(False, sock)
                return
            if sock is None:
                if done_request is not None and not ever_connected and not done_tried_at_once:
                    # No daemon reached yet: the done tries once now, within its short grace.
                    done_tried_at_once = True
                    self._retry_at = now
                if now < self._retry_at:
                    # Waits out its step whatever wakes the thread meanwhile (a done), so that a
                    # daemon that closes every connection is never called on in a tight loop.
                    delay = self._retry_at - now
                    if give_up_at is not None:
                        delay = min(delay, max(0.0, give_up_at - now))
                    self._sleep(delay)
                    continue
                sock = self._connect()
                if sock is None:
                    self._back_off()
                    continue
                ever_connected = True
                if not self._refused:  # a refusal on the last connection keeps the backoff
                    self._attempt = 0
                self._refused = False
                buffer = b""
                done_seq = -1
                # Claim the token first: a cancel then reaches this worker before, or without, any update.
                if not self._send(sock, "claim", {"v": PROTOCOL_VERSION, "progressToken": self.token}):
                    sock = self._dropped(sock)
                    continue
                with self._lock:
                    newest = self._newest
                    self._newest_sent = newest is not None
                if newest is not None:  # a restarted daemon knows nothing: the newest goes first
                    seq += 1
                    resync_seq = seq
                    if not self._send(sock, "progress", self._progress_data(newest, seq)):
                        sock = self._dropped(sock)
                        continue
                    next_send_at = time.monotonic() + self._interval
                continue
            timeout: Optional[float] = None
            if done_request is not None:
                if done_seq >= 0 and done_request.get("resend_at", now + 1) <= now:
                    del done_request["resend_at"]
                    done_seq = -1
                if done_seq < 0:
                    if unsent is not None:
                        self._mark_sent(unsent)
                        if not self._send(sock, "progress", self._progress_data(unsent)):
                            sock = self._dropped(sock)
                            continue
                    seq += 1
                    done_seq = seq
                    data = {"v": PROTOCOL_VERSION, "progressToken": self.token, "status": done_request["status"], "seq": done_seq}
                    if "message" in done_request:
                        data["message"] = done_request["message"]
                    if not self._send(sock, "done", data):
                        done_retried = True
                        sock = self._dropped(sock)
                        continue
                timeout = max(0.0, min(done_request["deadline"], done_request.get("resend_at", done_request["deadline"])) - now)
            elif unsent is not None:
                if now >= next_send_at:
                    self._mark_sent(unsent)
                    if not self._send(sock, "progress", self._progress_data(unsent)):
                        sock = self._dropped(sock)
                        continue
                    next_send_at = now + self._interval
                    continue
                timeout = next_send_at - now
            else:
                with self._lock:
                    if self._newest is not None and not self._newest_sent or self._state != "open":
                        continue
                    self._idle = True
            try:
                readable, _, _ = select.select([sock, self._wake_r], [], [], timeout)
            except (OSError, ValueError):
                sock = self._dropped(sock)
                continue
            finally:
                with self._lock:
                    self._idle = False
            if self._wake_r in readable:
                self._drain_wake()
            if sock in readable:
                try:
                    chunk = sock.recv(65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    if done_seq >= 0:
                        done_retried = True
                    sock = self._dropped(sock)
                    continue
                buffer += chunk
                while FORM_FEED in buffer:
                    raw, buffer = buffer.split(FORM_FEED, 1)
                    outcome = self._receive(raw, done_seq, resync_seq, done_retried)
                    if outcome is not None:
                        self._finish(outcome, sock)
                        return

    def _receive(self, raw: bytes, done_seq: int, resync_seq: int, done_retried: bool) -> Optional[bool]:
        """Handles one frame from the daemon; returns the done outcome when this frame settles it."""
        try:
            envelope = json.loads(raw.decode("utf-8"))
            kind = envelope.get("type")
            data = envelope.get("data") or {}
        except (ValueError, AttributeError):
            self._warn("bad_reply", "the daemon sent something unreadable")
            return None
        if kind == "ack" and done_seq >= 0 and data.get("seq") == done_seq:
            return True
        if kind == "rejected":
            code = data.get("code")
            if code in REFUSED_FRAME_CODES:
                # Which frame is not said: nothing sent on this connection is sent again.
                self._refused = True
                with self._lock:
                    if self._newest_sent:
                        self._newest = None
                        self._newest_sent = False
                self._warn(
                    str(code),
                    "the daemon refused a frame (%s) and closed the connection; it is not sent again: %s" % (code, data.get("message")),
                )
                return False if done_seq >= 0 else None
            if code == "too_many_connections":
                # Accepted only to say so and close: coming back at once would not help.
                self._refused = True
                self._warn(
                    str(code),
                    "the daemon on %s serves --max-connections workers already: %s; reconnecting with backoff" % (self.socket_path, data.get("message")),
                )
                return None
            if done_seq >= 0 and data.get("seq") == done_seq:
                if done_retried and code == "stream_closed":
                    return True  # a resent done found the stream it had already ended
                request = self._done_request
                resend_at = time.monotonic() + JOURNAL_RETRY_SECONDS
                if code == "journal_failed" and request is not None and resend_at < request["deadline"]:
                    request["resend_at"] = resend_at  # not applied: the done is ours to send again
                    return None
                self._warn(str(code), "the daemon refused done (%s): %s" % (code, data.get("message")), once="done_" + str(code))
                return False
            if data.get("seq") == resync_seq and code == "non_monotonic":
                return None  # the daemon already had the value resent after a reconnect
            self._warn(str(code), "the daemon refused an update (%s): %s" % (code, data.get("message")))
        elif kind == "cancel" and data.get("progressToken") == self.token and type(data.get("progressToken")) is type(self.token):
            self._on_cancel(data.get("reason"))
        return None

    def _on_cancel(self, reason: Optional[str]) -> None:
        if self._cancelled:
            return
        self._cancel_reason = reason
        self._cancelled = True
        callback = self.on_cancel
        if callback is not None:
            try:
                callback(reason)
            except Exception as error:
                self._warn("cancel_callback", "on_cancel raised %r" % (error,))

    def _finish(self, delivered: bool, sock: Optional[_socket.socket]) -> None:
        self._delivered = delivered
        with self._lock:
            if self._state == "ending":
                self._state = "ended"
        if sock is not None:
            sock.close()
        self._connected = False
        self._done_settled.set()

    def _connect(self) -> Any:
        if _is_pipe(self.socket_path):
            try:
                connection = _PipeConnection(self.socket_path)
            except OSError as error:
                self._no_daemon(error)
                return None
            self._connected = True
            return connection
        # A daemon's socket belongs to the user it runs as; one owned by anybody else was planted
        # (another user can create <tmpdir>/mcp-progress-<uid> first) and would read every frame.
        try:
            owner = os.lstat(self.socket_path).st_uid
        except OSError:
            owner = None
        if owner is not None and hasattr(os, "getuid") and owner != os.getuid():
            self._warn(
                "foreign_owner",
                "%s belongs to uid %d, not to you (uid %d): another user may have planted it, so it is not used. "
                "Remove it, or give your daemon a runtime dir of your own with $MCP_PROGRESS_RUNTIME_DIR"
                % (self.socket_path, owner, os.getuid()),
            )
            return None
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            sock.settimeout(max(1.0, self._done_timeout))
            sock.connect(self.socket_path)
        except OSError as error:
            sock.close()
            if error.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                # The daemon's queue of connects is full (a burst): it is there; retried with backoff.
                self._daemon_busy = True
                self._warn(
                    "connect_failed",
                    "the daemon on %s is busy (its queue of connects is full); retrying" % (self.socket_path,),
                )
                return None
            self._no_daemon(error)
            return None
        self._connected = True
        return sock

    def _no_daemon(self, error: OSError) -> None:
        self._warn(
            "daemon_not_running",
            "no daemon on %s (%s): start it with \"mcp-progress daemon\"; progress will be sent when it is up"
            % (self.socket_path, error.strerror or error),
        )

    def _back_off(self) -> None:
        """The next connect waits its backoff step (as the Node and C clients'): after a failed
        connect and after any lost connection, refused or not, never at once."""
        self._retry_at = time.monotonic() + backoff_delay(self._attempt)
        self._attempt += 1

    def _dropped(self, sock: _socket.socket) -> None:
        try:
            sock.close()
        except OSError:
            pass
        self._connected = False
        self._back_off()
        with self._lock:
            self._newest_sent = False
            open_ = self._state in ("open", "ending")
        if open_:
            self._warn("daemon_disconnected", "lost the daemon on %s; reconnecting" % self.socket_path)
        return None

    def _sleep(self, seconds: float) -> None:
        try:
            readable, _, _ = select.select([self._wake_r], [], [], seconds)
        except (OSError, ValueError):
            time.sleep(seconds)
            return
        if readable:
            self._drain_wake()

    def _drain_wake(self) -> None:
        try:
            while _wake_read(self._wake_r):
                pass
        except (BlockingIOError, OSError):
            pass

    def _mark_sent(self, update: Tuple[float, Optional[float], Optional[str]]) -> None:
        with self._lock:
            if self._newest is update:
                self._newest_sent = True

    def _progress_data(self, update: Tuple[float, Optional[float], Optional[str]], seq: Optional[int] = None) -> Dict[str, Any]:
        progress, total, message = update
        data: Dict[str, Any] = {"v": PROTOCOL_VERSION, "progressToken": self.token, "progress": progress}
        if total is not None:
            data["total"] = total
        if message is not None:
            data["message"] = _fit_message(message)
        if seq is not None:
            data["seq"] = seq
        return data

    def _send(self, sock: _socket.socket, kind: str, data: Dict[str, Any]) -> bool:
        try:
            payload = json.dumps({"type": kind, "data": data}, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
        except (TypeError, ValueError) as error:
            self._warn("invalid_field", "a frame could not be encoded and was dropped: %s" % (error,))
            return True
        try:
            # Nothing sent holds a lone surrogate (the token is checked, messages are fitted); were
            # one left, it would go as its JSON escape, which the daemon names, where raw it would
            # raise here and end the client's thread.
            sock.sendall(payload.encode("utf-8", "backslashreplace") + FORM_FEED)
        except OSError:
            return False
        return True


def _wake_pair() -> Tuple[Any, Any]:
    """What the client's thread waits on beside the daemon: a pipe, or on Windows, where select()
    takes sockets only, a socket pair."""
    if os.name == "nt":
        reader, writer = _socket.socketpair()
        reader.setblocking(False)
        writer.setblocking(False)
        return reader, writer
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    return read_fd, write_fd


def _wake_write(end: Any) -> None:
    end.send(b"x") if isinstance(end, _socket.socket) else os.write(end, b"x")


def _wake_read(end: Any) -> bytes:
    return end.recv(4096) if isinstance(end, _socket.socket) else os.read(end, 4096)


def _is_pipe(path: str) -> bool:
    """Whether the daemon is reached by opening `path` as a file: a Windows named pipe (Windows
    has no AF_UNIX for Python), or on POSIX a character device or FIFO that leads to a daemon."""
    if os.name == "nt":
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


class _PipeConnection:
    """The daemon's pipe opened as a file, shaped like the socket the client's loop uses.

    select() cannot wait on a file on Windows, so a thread reads the pipe and passes what it read
    through a socket pair, whose other end the loop waits on. The thread reads only what is there
    (PeekNamedPipe on Windows): a blocking read would hold up every write on the same handle.
    """

    def __init__(self, path: str) -> None:
        self._file = open(path, "r+b", buffering=0)
        self._inside, self._outside = _socket.socketpair()
        self._closed = False
        threading.Thread(target=self._pump, name="mcp-progress-pipe", daemon=True).start()

    def _pump(self) -> None:
        try:
            while not self._closed:
                chunk = self._read_available()
                if chunk is None:
                    continue
                if not chunk:
                    break
                self._inside.sendall(chunk)
        except (OSError, ValueError):
            pass
        finally:
            try:
                self._inside.close()
            except OSError:
                pass

    def _read_available(self) -> Optional[bytes]:
        """What the pipe holds now (b"" at its end), or None after a short wait for more."""
        if os.name == "nt":
            import ctypes
            import msvcrt

            handle = msvcrt.get_osfhandle(self._file.fileno())
            available = ctypes.c_ulong(0)
            if not ctypes.windll.kernel32.PeekNamedPipe(handle, None, 0, None, ctypes.byref(available), None):
                return b""  # the daemon closed its end
            if available.value == 0:
                time.sleep(0.005)
                return None
            return self._file.read(available.value)
        readable, _, _ = select.select([self._file], [], [], 0.5)
        return self._file.read(65536) if readable else None

    def fileno(self) -> int:
        return self._outside.fileno()

    def recv(self, size: int) -> bytes:
        return self._outside.recv(size)

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = self._file.write(view)
            view = view[written or 0 :]

    def close(self) -> None:
        self._closed = True
        for end in (self._file, self._outside):
            try:
                end.close()
            except OSError:
                pass


# Streams whose client thread may still hold an unsent update; a stream is forgotten with its object.
_live: "weakref.WeakSet[Progress]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """At exit, each open stream sends its newest update (it does not send done: the job did not say)."""
    for progress in list(_live):
        progress.close()


def _safe_number(value: Any) -> bool:
    """A number the daemon takes for progress (and, when >= 0, for total): finite, within ±(2^53 - 1)."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and -MAX_SAFE_NUMBER <= value <= MAX_SAFE_NUMBER
    )


def _token_problem(token: Any) -> Optional[str]:
    """Why the daemon would refuse ``token`` (invalid_token), or None when it takes it: the rule
    of the Node and C clients (tokenProblem, mcp_progress_open). A name from the environment that
    is not UTF-8 holds lone surrogates (surrogateescape)."""
    rule = "a token is a string of 1 to %d UTF-8 bytes with no lone surrogate, or an integer within ±%d" % (
        MAX_TOKEN_BYTES,
        MAX_SAFE_NUMBER,
    )
    if isinstance(token, str):
        shown = json.dumps(_LONE_SURROGATE.sub("\ufffd", token[:60]), ensure_ascii=False) + ("..." if len(token) > 60 else "")
        if _LONE_SURROGATE.search(token):
            return "token %s holds a lone surrogate (a byte that is not UTF-8): %s" % (shown, rule)
        size = len(token.encode("utf-8"))
        return None if 1 <= size <= MAX_TOKEN_BYTES else "token %s is %d bytes: %s" % (shown, size, rule)
    if isinstance(token, int) and not isinstance(token, bool):
        return None if -MAX_SAFE_NUMBER <= token <= MAX_SAFE_NUMBER else "token %d is not one: %s" % (token, rule)
    return "token %r is not one: %s" % (token, rule)


# The tqdm adapter: the bars of one process share one stream.

_default: Optional[Progress] = None
_default_lock = threading.Lock()
_uncaught: List[BaseException] = []


def default_progress() -> Progress:
    """The stream the tqdm adapter publishes to, from the environment; created on first use.

    It sends done when the interpreter exits: "cancelled" if the stream was
    cancelled, "error" after an uncaught exception, else "ok". (``sys.exit(1)``
    cannot be told apart from success: use ``with Progress()`` for that.)
    """
    global _default
    with _default_lock:
        if _default is None:
            _default = Progress()
            if _default.enabled:
                previous_hook = sys.excepthook

                def hook(kind: Any, value: Any, tb: Any) -> None:
                    _uncaught.append(value)
                    previous_hook(kind, value, tb)

                sys.excepthook = hook
                atexit.register(_finish_default)
        return _default


def _finish_default() -> None:
    progress = _default
    if progress is None or progress._state != "open":
        return
    error = _uncaught[-1] if _uncaught else None
    if progress.cancelled or isinstance(error, KeyboardInterrupt):
        progress.done("cancelled", progress.cancel_reason)
    elif error is not None:
        progress.done("error", "".join(traceback.format_exception_only(type(error), error)).strip())
    else:
        progress.done("ok")


class _BarLink:
    """What one tqdm bar contributes to the shared stream."""

    def __init__(self, bar: Any, progress: Progress, stop_on_cancel: bool) -> None:
        self.bar = bar
        self.progress = progress
        self.stop_on_cancel = stop_on_cancel
        #: The bar is closing: its last redraw must not raise Cancelled.
        self.closing = False


_open_bars: List[_BarLink] = []
# Where the current run of bars starts: bars that follow each other keep counting up.
_base: List[float] = [0.0]


def _publish_bars(progress: Progress) -> None:
    """The stream's value from the open bars: the outermost bar counts, the next one
    adds a fraction of a step (epoch 2 at batch 500 of 1000 is 2.5 of the epochs)."""
    links = [link for link in _open_bars if link.progress is progress]
    if not links:
        return
    outer = links[0].bar
    value = float(outer.n)
    inner = links[1].bar if len(links) > 1 else None
    fraction = 0.0
    if inner is not None and inner.total:
        fraction = min(1.0, float(inner.n) / float(inner.total))
        value += fraction
    base = _base[0]
    # The message says what the value says: once the inner bar is full, its step of the outer
    # bar is done (3 of 3 epochs, not "epochs 2/3" at 3/3), and the inner bar is not shown.
    shown = links[:1] if fraction >= 1.0 else links
    parts = []
    for index, link in enumerate(shown):
        bar = link.bar
        n = bar.n + 1 if index == 0 and fraction >= 1.0 else bar.n
        desc = (getattr(bar, "desc", "") or "").rstrip(": ")
        count = "%g/%g" % (n, bar.total) if bar.total else "%g" % n
        parts.append((desc + " " + count).strip())
    postfix = getattr(links[-1].bar, "postfix", None)
    if postfix:
        parts.append(str(postfix))
    last = progress._last_progress
    if last is not None and not base + value > last:
        return  # an outer bar catching up with what an inner bar already reported
    total = base + float(outer.total) if outer.total else None
    progress.update(_plain(base + value), _plain(total) if total is not None else None, " · ".join(parts))


def _plain(value: float) -> float:
    return int(value) if float(value).is_integer() else value


def _link_opened(link: _BarLink) -> None:
    if not any(other.progress is link.progress for other in _open_bars):
        _base[0] = link.progress._last_progress or 0.0
    _open_bars.append(link)


def _link_closed(link: _BarLink) -> None:
    if link in _open_bars:
        _publish_bars(link.progress)
        _open_bars.remove(link)


def _after_display(link: _BarLink) -> None:
    if link not in _open_bars:
        return
    _publish_bars(link.progress)
    if link.stop_on_cancel and link.progress.cancelled and not link.closing:
        raise Cancelled(link.progress.cancel_reason or "cancelled by the MCP client")


def attach(bar: Any, progress: Optional[Progress] = None, stop_on_cancel: bool = True) -> Any:
    """Publish an existing tqdm bar: ``attach(tqdm(total=n))``. Returns the bar.

    The bar publishes whenever it redraws (tqdm's own rate limit) and when it
    closes. With ``stop_on_cancel`` the next redraw after a cancel raises
    ``Cancelled`` inside the loop that drives the bar.
    """
    link = _BarLink(bar, progress or default_progress(), stop_on_cancel)
    if not link.progress.enabled:
        return bar
    display = bar.display
    close = bar.close

    def display_and_publish(*args: Any, **kwargs: Any) -> Any:
        result = display(*args, **kwargs)
        _after_display(link)
        return result

    def close_and_publish(*args: Any, **kwargs: Any) -> Any:
        link.closing = True
        try:
            return close(*args, **kwargs)
        finally:
            _link_closed(link)

    bar.display = display_and_publish
    bar.close = close_and_publish
    _link_opened(link)
    _publish_bars(link.progress)
    return bar


try:
    import tqdm as _tqdm_module

    class tqdm(_tqdm_module.tqdm):  # type: ignore[no-redef]  # noqa: N801 - the name is the point
        """tqdm that also publishes: ``from mcp_progress import tqdm`` instead of
        ``from tqdm import tqdm``. Extra keyword arguments: ``progress`` (a
        Progress; default: the environment's) and ``stop_on_cancel`` (True)."""

        def __init__(self, *args: Any, progress: Optional[Progress] = None, stop_on_cancel: bool = True, **kwargs: Any) -> None:
            self._mcp_link: Optional[_BarLink] = None
            super().__init__(*args, **kwargs)
            if not getattr(self, "disable", False):
                link = _BarLink(self, progress or default_progress(), stop_on_cancel)
                if link.progress.enabled:
                    self._mcp_link = link
                    _link_opened(link)
                    _publish_bars(link.progress)

        def display(self, *args: Any, **kwargs: Any) -> Any:
            result = super().display(*args, **kwargs)
            link = getattr(self, "_mcp_link", None)
            if link is not None:
                _after_display(link)
            return result

        def close(self) -> None:
            link = getattr(self, "_mcp_link", None)
            if link is not None:
                link.closing = True
            try:
                super().close()
            finally:
                link = getattr(self, "_mcp_link", None)
                if link is not None:
                    _link_closed(link)

except ImportError:  # no tqdm installed: a wrapper that publishes without drawing

    class tqdm:  # type: ignore[no-redef]  # noqa: N801
        """A stand-in for tqdm when it is not installed: publishes, draws nothing."""

        def __init__(
            self,
            iterable: Optional[Iterable[Any]] = None,
            desc: Optional[str] = None,
            total: Optional[float] = None,
            *,
            progress: Optional[Progress] = None,
            stop_on_cancel: bool = True,
            **_ignored: Any,
        ) -> None:
            if total is None and iterable is not None:
                try:
                    total = len(iterable)  # type: ignore[arg-type]
                except TypeError:
                    total = None
            self.iterable = iterable
            self.desc = desc or ""
            self.total = total
            self.n = 0
            self.postfix: Optional[str] = None
            self.disable = False
            self._closed = False
            self._link = _BarLink(self, progress or default_progress(), stop_on_cancel)
            if self._link.progress.enabled:
                _link_opened(self._link)
                _publish_bars(self._link.progress)

        def __iter__(self) -> Iterator[Any]:
            try:
                for item in self.iterable or ():
                    yield item
                    self.update(1)
            finally:
                self.close()

        def __len__(self) -> int:
            return int(self.total or 0)

        def __enter__(self) -> "tqdm":
            return self

        def __exit__(self, *exc: Any) -> bool:
            self.close()
            return False

        def update(self, n: float = 1) -> None:
            self.n += n
            self.display()

        def display(self, *args: Any, **kwargs: Any) -> None:
            _after_display(self._link)

        def refresh(self) -> None:
            self.display()

        def set_description(self, desc: Optional[str] = None, refresh: bool = True) -> None:
            self.desc = desc or ""
            if refresh:
                self.display()

        def set_postfix(self, ordered_dict: Any = None, refresh: bool = True, **kwargs: Any) -> None:
            items = dict(ordered_dict or {}, **kwargs)
            self.postfix = ", ".join("%s=%s" % (k, v) for k, v in items.items())
            if refresh:
                self.display()

        def close(self) -> None:
            if not self._closed:
                self._closed = True
                _link_closed(self._link)

        @staticmethod
        def write(text: str, file: Any = None, end: str = "\n") -> None:
            (file or sys.stdout).write(text + end)

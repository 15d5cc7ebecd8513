/*
 * mcp_progress.h: a single-header C client for mcp-progress-bridge workers (C99, no
 * dependencies; Linux, macOS and Windows). It speaks the worker protocol of docs/PROTOCOL.md
 * section 2: JSON frames ended by a form feed over the daemon's Unix socket, or on Windows its
 * named pipe, found in MCP_PROGRESS_SOCKET; the token comes from MCP_PROGRESS_TOKEN.
 *
 * Build: any C99 compiler; with -std=c99 add -D_POSIX_C_SOURCE=200809L (cc's default needs
 * nothing). Windows: mingw-w64 or MSVC, nothing to link.
 *
 * In exactly one C file, before including it:
 *     #define MCP_PROGRESS_IMPLEMENTATION
 *     #include "mcp_progress.h"
 *
 *     mcp_progress p;
 *     if (mcp_progress_open(&p, NULL, NULL) != 0) fprintf(stderr, "%s\n", p.error);
 *     mcp_progress_on_cancel(&p, on_cancel, &state);   // called from update, poll and done
 *     mcp_progress_claim(&p);                          // cancels reach us before the first update
 *     for (...) mcp_progress_update(&p, i, n, "rendering");
 *     if (mcp_progress_done(&p, "ok", "rendered", 5000) != 0) fprintf(stderr, "%s\n", p.error);
 *     mcp_progress_close(&p);
 *
 * Every function returns 0 on success and -1 on failure, with a message in p.error. A worker
 * without a daemon keeps working: its updates fail, and it may ignore that. The daemon may start
 * after the worker, or restart under it: when open could not connect, or the daemon went away,
 * each later call connects again first (waits of 50 ms doubling to 2 s between tries, a random
 * half of each taken off, as the Node client's; the first try after a lost connection waits its
 * step too, so a daemon that closes every connection is never called on in a tight loop; a daemon
 * at its --max-connections accepts a connection only to refuse it, and one that refuses a frame as
 * malformed closes the connection, neither of which ends the backoff; a write that finds the
 * connection closed reads what the daemon said before closing, so that its refusal is reported
 * too), claims the token again if it was claimed, and sends again, before anything else, the
 * newest update it published, whether or not that went out before the loss (not a backlog; as the
 * Node and Python clients do), so that a daemon that restarted learns the stream at once, even
 * from a worker that makes no further update; it carries a seq, and a daemon that had it already
 * answers non_monotonic, which is not a failure. Then it goes on; poll waits
 * for the daemon up to its timeout, and done up to its own (250 ms when it never connected),
 * sending the done again on the new connection (refused stream_closed there, it was delivered: the
 * first one landed before the loss, see mcp_progress_done);
 * a done refused journal_failed (the daemon's disk is full) is sent again every 250 ms then,
 * and one waiting on a connection whose frame the daemon refuses as malformed fails at once (as
 * the Node client's: which frame is not said, and sent again it would be refused again).
 * Whatever its outcome, done then closes the connection and p connects no more (see
 * mcp_progress_done). A call that fails on the daemon's refusal leaves its code in p.refused
 * (PROTOCOL.md 2.5), and p.error says what was refused and why; p.refused is "" when a call saw
 * no refusal (no daemon, no answer in time).
 * A message (of an update or a done) goes as the daemon takes it, as the Node and Python clients
 * send it: each byte that is not part of a valid UTF-8 character becomes U+FFFD (a filename or a
 * log line may hold such bytes, and the daemon refuses a frame that is not UTF-8), and one then
 * longer than MCP_PROGRESS_MAX_MESSAGE bytes is cut to MCP_PROGRESS_MAX_MESSAGE - 3 bytes, never
 * inside a character, with "..." added (see mcpp_fit_message).
 * Progress must increase (MCP requires it); the daemon refuses a value that does not. What else
 * the daemon would refuse is refused here first, as the Node and Python clients refuse it, so that
 * it costs neither the value nor the connection: a token over MCP_PROGRESS_MAX_TOKEN bytes or not
 * UTF-8 (at open: p is of no use then); a progress or total that is NaN, infinite or beyond
 * MCP_PROGRESS_MAX_NUMBER, or a total below 0 other than MCP_PROGRESS_NO_TOTAL (the update fails
 * at once, naming the field and the value, and sends nothing, leaving the connection and the
 * newest update as they were: JSON has no NaN or infinity, so the daemon would refuse the frame
 * as invalid_json and close the connection, and, kept as the newest, it would be refused again on
 * each new connection); a done status other than ok, error or cancelled (the stream ends as error
 * instead: see mcp_progress_done). p.refused stays "" for these: the daemon refused nothing.
 * Not thread-safe: use one mcp_progress per thread, or a lock around each call.
 */
#ifndef MCP_PROGRESS_H
#define MCP_PROGRESS_H

#include <stddef.h>

#define MCP_PROGRESS_MAX_FRAME 65536
/* The longest message the daemon takes, in UTF-8 bytes (MAX_MESSAGE_BYTES, PROTOCOL.md 2.3). */
#define MCP_PROGRESS_MAX_MESSAGE 4096
/* The longest token the daemon takes, in UTF-8 bytes (MAX_TOKEN_BYTES, PROTOCOL.md 2.2). */
#define MCP_PROGRESS_MAX_TOKEN 1024
/* The largest magnitude of a progress or total the daemon takes, 2^53 - 1 (MAX_SAFE_NUMBER,
 * PROTOCOL.md 5.1): every integer up to it is exact in a double, an int64 and a JavaScript number. */
#define MCP_PROGRESS_MAX_NUMBER 9007199254740991.0
/* The total of an update that has none (mcp_progress_update): exactly -1; any other total below 0
 * is refused, as the Node and Python clients refuse it. */
#define MCP_PROGRESS_NO_TOTAL (-1.0)

typedef void (*mcp_progress_cancel_fn)(void *user, const char *reason);

typedef struct mcp_progress {
#ifdef _WIN32
  void *pipe; /* HANDLE */
#else
  int fd;
#endif
  int connected;
  int cancelled;
  long next_seq;
  char token[1100];
  char error[512];
  mcp_progress_cancel_fn on_cancel;
  void *cancel_user;
  size_t inbox_used;
  char inbox[8192];
  /* Kept for connecting again: where the daemon listens, and what this worker said to it. */
  char socket_path[1100];
  int claimed;
  int ever_connected;
  int closed;
  int ended; /* mcp_progress_done was called: the stream is over, and nothing more is sent. */
  int attempts;
  long retry_at;
  /* The daemon refused the last connection (too_many_connections), or a frame of it as
   * malformed: the next does not reset the backoff. */
  int refused_connection;
  /* The code of the daemon's refusal that the last call saw ("" when it saw none), such as
   * "invalid_utf8" or "stream_closed": p.error then says what was refused and why. */
  char refused[64];
  /* The newest update published (its fields; "" for none), sent again first on each connection.
   * Room for any update: its message, fitted, at most MCP_PROGRESS_MAX_MESSAGE bytes with every
   * byte escaped (\u00XX). */
  char newest[MCP_PROGRESS_MAX_MESSAGE * 6 + 128];
  double newest_progress;
  int newest_sent; /* It went out on the current connection. */
  long resync_seq; /* The seq it was sent again with: non_monotonic to it means the daemon had it. */
} mcp_progress;

/*
 * Connects to socket_path (NULL: $MCP_PROGRESS_SOCKET) for token (NULL: $MCP_PROGRESS_TOKEN).
 * -1 with no token or no socket (p is of no use then), or when the daemon cannot be reached now
 * (p stays usable: later calls connect again). A token the daemon would refuse (invalid_token,
 * or invalid_utf8, which closes the connection) is refused here the same way, as the Node and
 * Python clients refuse it (progress is off): over MCP_PROGRESS_MAX_TOKEN bytes, or not UTF-8
 * (a byte that starts no valid character: p.error says which), so p is of no use then either.
 */
int mcp_progress_open(mcp_progress *p, const char *socket_path, const char *token);
/* Calls fn(user, reason) once when the job is cancelled from the MCP side (reason may be ""). */
void mcp_progress_on_cancel(mcp_progress *p, mcp_progress_cancel_fn fn, void *user);
/* Says this connection works for the token: cancels reach it before its first update. */
int mcp_progress_claim(mcp_progress *p);
/* One update; total MCP_PROGRESS_NO_TOTAL (-1) and message NULL leave them out. The message is
 * fitted (see above). What the daemon would refuse fails at once (-1, p.error naming the field and
 * value; p.refused ""), sends nothing and keeps the newest update and the connection as they
 * were, as the Node and Python clients' invalid_field: a progress that is NaN, infinite or beyond
 * ±MCP_PROGRESS_MAX_NUMBER; a total that is NaN, infinite, above MCP_PROGRESS_MAX_NUMBER or below
 * 0 (other than MCP_PROGRESS_NO_TOTAL: -0.5, -2 and -infinity are refused, not taken as none). */
int mcp_progress_update(mcp_progress *p, double progress, double total, const char *message);
/*
 * Ends the stream ("ok", "error" or "cancelled"; NULL is "ok") and waits up to timeout_ms for its
 * ack, sending it again on each new connection; fails at once when the daemon refuses it, or
 * refuses a frame of its connection as malformed. A done sent again because the connection it went out on was lost
 * before its answer, and refused stream_closed, is delivered (0, p.refused ""): the first one
 * reached the daemon and ended the stream before the loss (as the Node and Python clients count
 * it). Then, acked or not, it closes the connection, and later calls fail
 * without connecting again (as the Node and Python clients do): nothing follows a done (PROTOCOL.md
 * 3), and a claim lasts as long as its connection, so one kept open after a done the daemon
 * refused or did not answer would keep the stream active, never abandoned (PROTOCOL.md 3,
 * Abandoned), for a worker that has given up on it. A done that was written but not answered is
 * not lost by the close: a daemon that was only slow still reads it. Call mcp_progress_close
 * after it all the same. Any other status (one the daemon would refuse, and with it the done,
 * leaving the stream to be abandoned) is not sent: the stream ends as "error" instead, as the Node
 * and Python clients end it, and the call returns -1 even when that was delivered, p.error naming
 * the status and saying whether the "error" was delivered (p.refused as for any done).
 */
int mcp_progress_done(mcp_progress *p, const char *status, const char *message, int timeout_ms);
/* Reads what the daemon sent (cancels) for up to timeout_ms; 0 means do not wait. */
int mcp_progress_poll(mcp_progress *p, int timeout_ms);
void mcp_progress_close(mcp_progress *p);

#endif /* MCP_PROGRESS_H */

#ifdef MCP_PROGRESS_IMPLEMENTATION

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#include <windows.h>
#else
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#ifndef MSG_NOSIGNAL /* macOS: a lost daemon raises SIGPIPE there unless the program ignores it. */
#define MSG_NOSIGNAL 0
#endif
#endif

static int mcpp_fail(mcp_progress *p, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(p->error, sizeof p->error, format, args);
  va_end(args);
  return -1;
}

/* Appends s as a JSON string (quotes included); returns the new length, or -1 if it does not fit. */
static int mcpp_json_string(char *out, int used, int size, const char *s) {
  static const char hex[] = "0123456789abcdef";
  if (used + 1 >= size) return -1;
  out[used++] = '"';
  for (const unsigned char *c = (const unsigned char *)s; *c != 0; c++) {
    if (used + 7 >= size) return -1;
    if (*c == '"' || *c == '\\') {
      out[used++] = '\\';
      out[used++] = (char)*c;
    } else if (*c < 0x20) {
      out[used++] = '\\';
      out[used++] = 'u';
      out[used++] = '0';
      out[used++] = '0';
      out[used++] = hex[*c >> 4];
      out[used++] = hex[*c & 15];
    } else {
      out[used++] = (char)*c;
    }
  }
  out[used++] = '"';
  out[used] = 0;
  return used;
}

/*
 * The length of the UTF-8 character that starts at s (1 to 4 bytes), or 0 when the byte at s
 * starts none that is whole and valid (Unicode's table 3-7: no overlong form, no surrogate,
 * nothing past U+10FFFF), as the daemon's check has it.
 */
static int mcpp_utf8_length(const unsigned char *s) {
  unsigned char lead = s[0];
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) return (s[1] & 0xc0) == 0x80 ? 2 : 0;
  if (lead >= 0xe0 && lead <= 0xef) {
    unsigned char low = lead == 0xe0 ? 0xa0 : 0x80, high = lead == 0xed ? 0x9f : 0xbf;
    return s[1] >= low && s[1] <= high && (s[2] & 0xc0) == 0x80 ? 3 : 0;
  }
  if (lead >= 0xf0 && lead <= 0xf4) {
    unsigned char low = lead == 0xf0 ? 0x90 : 0x80, high = lead == 0xf4 ? 0x8f : 0xbf;
    return s[1] >= low && s[1] <= high && (s[2] & 0xc0) == 0x80 && (s[3] & 0xc0) == 0x80 ? 4 : 0;
  }
  return 0;
}

/*
 * message as the daemon takes it, into out (MCP_PROGRESS_MAX_MESSAGE + 1 bytes), by the rule of
 * the Node and Python clients (fitMessage, _fit_message): each byte that is not part of a valid
 * UTF-8 character becomes U+FFFD (one for each byte, as Python's client makes of a name decoded
 * with surrogateescape), since the daemon refuses a frame that is not UTF-8 (invalid_utf8) and
 * closes the connection; then, if that is over MCP_PROGRESS_MAX_MESSAGE bytes, it is cut to at
 * most MCP_PROGRESS_MAX_MESSAGE - 3 bytes, never inside a character, and "..." is added. Sent as
 * it was, a longer one would be refused, and, kept as the newest update, refused again on each
 * new connection.
 */
static void mcpp_fit_message(const char *message, char *out) {
  static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */
  const unsigned char *at = (const unsigned char *)message;
  size_t used = 0;
  size_t cut = 0; /* The end of the last character that ends within MCP_PROGRESS_MAX_MESSAGE - 3. */
  while (*at != 0) {
    int length = mcpp_utf8_length(at);
    size_t size = length > 0 ? (size_t)length : sizeof replacement - 1;
    if (used + size > MCP_PROGRESS_MAX_MESSAGE) {
      memcpy(out + cut, "...", 4);
      return;
    }
    memcpy(out + used, length > 0 ? (const char *)at : replacement, size);
    used += size;
    if (used <= MCP_PROGRESS_MAX_MESSAGE - 3) cut = used;
    at += length > 0 ? length : 1;
  }
  out[used] = 0;
}

static long mcpp_now_ms(void) {
#ifdef _WIN32
  return (long)GetTickCount();
#else
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (long)(now.tv_sec * 1000 + now.tv_nsec / 1000000);
#endif
}

static void mcpp_sleep_ms(long ms) {
  if (ms <= 0) return;
#ifdef _WIN32
  Sleep((DWORD)ms);
#else
  poll(NULL, 0, (int)ms);
#endif
}

/* Reconnect waits (src/shared/defaults.ts RECONNECT_BACKOFF): 50 ms doubling to 2 s, of which a
 * random half is taken off, so that the workers a daemon restart drops do not all come back at
 * once. A done waits this long for a daemon when the worker never reached one. */
#define MCPP_BACKOFF_FIRST_MS 50
#define MCPP_BACKOFF_MAX_MS 2000
#define MCPP_NEVER_CONNECTED_GRACE_MS 250
/* A done refused journal_failed was not applied: sent again after this long (JOURNAL_RETRY_MS). */
#define MCPP_JOURNAL_RETRY_MS 250

static long mcpp_backoff_ms(int attempt) {
  static unsigned long state = 0;
  long step = MCPP_BACKOFF_FIRST_MS;
  for (int i = 0; i < attempt && step < MCPP_BACKOFF_MAX_MS; i++) step *= 2;
  if (step > MCPP_BACKOFF_MAX_MS) step = MCPP_BACKOFF_MAX_MS;
  if (state == 0) { /* Seeded per process: workers started together draw different waits. */
#ifdef _WIN32
    state = (unsigned long)GetCurrentProcessId() * 2654435761UL ^ (unsigned long)GetTickCount();
#else
    state = (unsigned long)getpid() * 2654435761UL ^ (unsigned long)mcpp_now_ms();
#endif
    state |= 1;
  }
  state = state * 1103515245UL + 12345UL;
  return step / 2 + (long)((state >> 8) % (unsigned long)(step / 2 + 1));
}

static void mcpp_disconnect(mcp_progress *p) {
#ifdef _WIN32
  if (p->pipe != NULL) CloseHandle((HANDLE)p->pipe);
  p->pipe = NULL;
#else
  if (p->fd >= 0) close(p->fd);
  p->fd = -1;
#endif
  p->connected = 0;
  p->inbox_used = 0;
}

/* One try at the daemon's socket (or pipe); on failure the next waits its turn (mcpp_ensure). */
static int mcpp_connect(mcp_progress *p) {
  const char *path = p->socket_path;
#ifdef _WIN32
  for (int attempt = 0;; attempt++) {
    HANDLE pipe = CreateFileA(path, GENERIC_READ | GENERIC_WRITE, 0, NULL, OPEN_EXISTING, 0, NULL);
    if (pipe != INVALID_HANDLE_VALUE) {
      p->pipe = pipe;
      break;
    }
    if (GetLastError() != ERROR_PIPE_BUSY || attempt == 3)
      return mcpp_fail(p, "cannot open the daemon's pipe %s (error %lu): is the daemon running? (later calls try again)", path, (unsigned long)GetLastError());
    WaitNamedPipeA(path, 2000);
  }
#else
  struct sockaddr_un address;
  memset(&address, 0, sizeof address);
  address.sun_family = AF_UNIX;
  strcpy(address.sun_path, path); /* Its length was checked by open. */
  p->fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (p->fd < 0) return mcpp_fail(p, "socket: %s", strerror(errno));
  if (connect(p->fd, (struct sockaddr *)&address, sizeof address) != 0) {
    int error = errno;
    close(p->fd);
    p->fd = -1;
    return mcpp_fail(p, "cannot connect to the daemon on %s: %s: is the daemon running? (later calls try again)", path, strerror(error));
  }
#endif
  p->connected = 1;
  p->ever_connected = 1;
  if (!p->refused_connection) p->attempts = 0;
  p->refused_connection = 0;
  p->newest_sent = 0;
  p->inbox_used = 0;
  return 0;
}

static int mcpp_send(mcp_progress *p, const char *type, const char *fields);

/*
 * The newest update, sent again on a new connection: a restarted daemon knows nothing of the
 * stream (as the Node and Python clients' #resyncSeq). With a seq of its own, so that the
 * daemon's non_monotonic to it (it had the value: only the connection was lost) can be told
 * from a refusal of the worker's own update, and ignored (mcpp_handle).
 */
static int mcpp_resend_newest(mcp_progress *p) {
  char fields[sizeof p->newest + 32];
  p->resync_seq = p->next_seq++;
  snprintf(fields, sizeof fields, "%s,\"seq\":%ld", p->newest, p->resync_seq);
  if (mcpp_send(p, "progress", fields) != 0) return -1;
  p->newest_sent = 1;
  return 0;
}

/*
 * Connected, or connects now when its wait is over (or `at_once`), claims the token again if
 * this worker had, and sends the newest update again before anything else: a restarted daemon
 * knows nothing of the connection before.
 */
static int mcpp_ensure(mcp_progress *p, int at_once) {
  if (p->connected) return 0;
  if (p->closed) return mcpp_fail(p, "mcp_progress_close was called");
  if (p->ended) return mcpp_fail(p, "the stream is over: mcp_progress_done was called (a new stream needs a new mcp_progress)");
  if (p->socket_path[0] == 0) return -1; /* open failed for want of a token or a socket: p.error says which */
  long now = mcpp_now_ms();
  if (!at_once && now < p->retry_at)
    return mcpp_fail(p, "not connected to the daemon on %s (tries again in %ld ms)", p->socket_path, p->retry_at - now);
  if (mcpp_connect(p) != 0) {
    p->retry_at = mcpp_now_ms() + mcpp_backoff_ms(p->attempts++);
    return -1;
  }
  if (p->claimed && mcpp_send(p, "claim", "") != 0) return -1;
  if (p->newest[0] != 0 && mcpp_resend_newest(p) != 0) return -1;
  return 0;
}

/* Whether p may connect again: open had a socket and a token, and neither close nor done was called. */
static int mcpp_may_reconnect(const mcp_progress *p) { return !p->closed && !p->ended && p->socket_path[0] != 0; }

/* Not connected: sleeps until the next try at the daemon, or the deadline if sooner; 0 when the
 * deadline has passed or p may not connect again (nothing to wait for). */
static int mcpp_wait_for_retry(mcp_progress *p, long deadline) {
  long now = mcpp_now_ms();
  if (!mcpp_may_reconnect(p) || now >= deadline) return 0;
  long wait = p->retry_at - now;
  mcpp_sleep_ms(wait < deadline - now ? wait : deadline - now);
  return 1;
}

/* The connection is lost: the next try waits its backoff step (as the Node client's), which a
 * connection the daemon refused does not reset, so that a daemon that closes every connection
 * is not called on in a tight loop. A daemon that closed a connection it refused is still there
 * (full, or refusing what this worker sends): p.error says so already. */
static int mcpp_lost(mcp_progress *p, const char *why) {
  mcpp_disconnect(p);
  p->retry_at = mcpp_now_ms() + mcpp_backoff_ms(p->attempts++);
  if (p->refused_connection) return -1;
  return mcpp_fail(p, "lost the daemon: %s", why);
}

static int mcpp_read(mcp_progress *p, int timeout_ms, long seq, int *rejected);

/* A write failed (EPIPE, ECONNRESET, a broken pipe): the daemon closed the connection, most often
 * after refusing an earlier frame of it. What it sent before closing is still there to read: read
 * it, so that its refusal (code and message) reaches p.error and p.refused and keeps the backoff,
 * rather than a bare "broken pipe" and a try at once that would be refused again. */
static int mcpp_write_failed(mcp_progress *p, const char *why) {
  char cause[128];
  int rejected = 0;
  snprintf(cause, sizeof cause, "%s", why); /* strerror's buffer may be written again meanwhile */
  mcpp_read(p, 0, -1, &rejected); /* Reading the end of the connection loses it (mcpp_lost). */
  return p->connected ? mcpp_lost(p, cause) : -1;
}

static int mcpp_write_all(mcp_progress *p, const char *bytes, size_t length) {
  if (mcpp_ensure(p, 0) != 0) return -1;
  while (length > 0) {
#ifdef _WIN32
    DWORD written = 0;
    if (!WriteFile((HANDLE)p->pipe, bytes, (DWORD)length, &written, NULL)) {
      char why[64];
      snprintf(why, sizeof why, "WriteFile error %lu", (unsigned long)GetLastError());
      return mcpp_write_failed(p, why);
    }
#else
    ssize_t written = send(p->fd, bytes, length, MSG_NOSIGNAL);
    if (written < 0) {
      if (errno == EINTR) continue;
      return mcpp_write_failed(p, strerror(errno));
    }
#endif
    bytes += written;
    length -= (size_t)written;
  }
  return 0;
}

/* Sends {"type":TYPE,"data":{"v":1,"progressToken":TOKEN,FIELDS}} and the form feed. */
static int mcpp_send(mcp_progress *p, const char *type, const char *fields) {
  char frame[MCP_PROGRESS_MAX_FRAME];
  int used = snprintf(frame, sizeof frame, "{\"type\":\"%s\",\"data\":{\"v\":1,\"progressToken\":", type);
  used = mcpp_json_string(frame, used, (int)sizeof frame, p->token);
  if (used < 0 || used + (int)strlen(fields) + 4 >= (int)sizeof frame)
    return mcpp_fail(p, "the %s frame is over %d bytes: shorten the message", type, MCP_PROGRESS_MAX_FRAME);
  used += snprintf(frame + used, sizeof frame - (size_t)used, "%s}}\f", fields);
  return mcpp_write_all(p, frame, (size_t)used);
}

/* The string value of "key" in a frame the daemon wrote (JSON.stringify: no spaces), unescaped. */
static int mcpp_field_string(const char *frame, const char *key, char *out, size_t size) {
  char pattern[64];
  snprintf(pattern, sizeof pattern, "\"%s\":\"", key);
  const char *at = strstr(frame, pattern);
  size_t used = 0;
  if (at == NULL || size == 0) return -1;
  for (at += strlen(pattern); *at != 0 && *at != '"' && used + 1 < size; at++) {
    if (*at == '\\' && at[1] != 0) {
      at++;
      if (*at == 'u') { /* Not needed for what a worker reads: kept as '?'. */
        out[used++] = '?';
        at += strlen(at) >= 5 ? 4 : strlen(at) - 1;
        continue;
      }
      out[used++] = *at == 'n' ? '\n' : *at == 't' ? '\t' : *at;
    } else {
      out[used++] = *at;
    }
  }
  out[used] = 0;
  return 0;
}

static long mcpp_field_integer(const char *frame, const char *key) {
  char pattern[64];
  snprintf(pattern, sizeof pattern, "\"%s\":", key);
  const char *at = strstr(frame, pattern);
  return at == NULL ? -1 : strtol(at + strlen(pattern), NULL, 10);
}

/* Whether the daemon refuses a frame with `code` as malformed and closes the connection
 * (REFUSED_FRAME_CODES in src/client/done-answers.ts). */
static int mcpp_refuses_frame(const char *code) {
  static const char *const codes[] = {"invalid_utf8", "invalid_json", "invalid_envelope", "reserved_event", "frame_too_large"};
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
    if (strcmp(code, codes[i]) == 0) return 1;
  return 0;
}

/* Handles one frame from the daemon; returns its seq if it answers one (ack or rejected). */
static long mcpp_handle(mcp_progress *p, const char *frame, int *rejected) {
  char type[32] = "";
  mcpp_field_string(frame, "type", type, sizeof type);
  if (strcmp(type, "cancel") == 0) {
    char reason[4200] = "";
    mcpp_field_string(frame, "reason", reason, sizeof reason);
    if (!p->cancelled) {
      p->cancelled = 1;
      if (p->on_cancel != NULL) p->on_cancel(p->cancel_user, reason);
    }
    return -1;
  }
  if (strcmp(type, "rejected") == 0) {
    char code[64] = "", message[4200] = "";
    long seq = mcpp_field_integer(frame, "seq");
    mcpp_field_string(frame, "code", code, sizeof code);
    /* The newest update sent again on connecting, which the daemon had already: not a failure. */
    if (seq >= 0 && seq == p->resync_seq && strcmp(code, "non_monotonic") == 0) return -1;
    mcpp_field_string(frame, "message", message, sizeof message);
    memcpy(p->refused, code, sizeof code); /* The same size, and ended. */
    if (strcmp(code, "too_many_connections") == 0) {
      /* Accepted only to say so and close: coming back at once would not help, and what was sent
       * on this connection was ignored (its newest update goes first on the next). */
      p->refused_connection = 1;
      mcpp_fail(p, "the daemon on %s serves --max-connections workers already: %s; reconnecting with backoff", p->socket_path, message);
    } else {
      /* A malformed frame (a token that is not UTF-8, a NaN) closes the connection,
       * and the next would send the same: coming back at once would loop (PROTOCOL 2.5). Which
       * frame it was is not said: nothing sent on this connection is sent again. */
      if (mcpp_refuses_frame(code)) {
        p->refused_connection = 1;
        if (p->newest_sent) p->newest[0] = 0;
        mcpp_fail(p, "the daemon refused a frame (%s) and closed the connection; it is not sent again: %s", code, message);
      } else {
        mcpp_fail(p, "the daemon refused a frame (%s): %s", code, message);
      }
    }
    *rejected = 1;
    return seq;
  }
  if (strcmp(type, "ack") == 0) return mcpp_field_integer(frame, "seq");
  return -1;
}

/*
 * Reads for up to timeout_ms; stops early once the answer to `seq` (if >= 0) came. 1: answered.
 * *rejected: that answer was a refusal (seq >= 0; an earlier update's refusal is not the done's),
 * or any refusal came (seq < 0). A frame of the connection refused as malformed answers `seq`
 * too, as a refusal: the daemon closes the connection, and `seq` might be the frame refused.
 */
static int mcpp_read(mcp_progress *p, int timeout_ms, long seq, int *rejected) {
  long deadline = mcpp_now_ms() + timeout_ms;
  for (;;) {
    char *end;
    while ((end = memchr(p->inbox, '\f', p->inbox_used)) != NULL) {
      size_t length = (size_t)(end - p->inbox);
      *end = 0;
      int refused = 0;
      long answered = mcpp_handle(p, p->inbox, &refused);
      memmove(p->inbox, end + 1, p->inbox_used - length - 1);
      p->inbox_used -= length + 1;
      if (seq >= 0 && (answered == seq || (refused && mcpp_refuses_frame(p->refused)))) {
        *rejected = refused;
        return 1;
      }
      if (seq < 0 && refused) *rejected = 1;
    }
    if (p->inbox_used >= sizeof p->inbox - 1) p->inbox_used = 0; /* No daemon frame is this long. */
    long left = deadline - mcpp_now_ms();
    if (!p->connected) return 0;
    if (left < 0) left = 0; /* Past the deadline (or timeout 0): still one look at what is there. */
#ifdef _WIN32
    DWORD available = 0;
    if (!PeekNamedPipe((HANDLE)p->pipe, NULL, 0, NULL, &available, NULL)) {
      mcpp_lost(p, "its pipe closed");
      return 0;
    }
    if (available == 0) {
      if (left == 0) return 0;
      Sleep(5);
      continue;
    }
    DWORD got = 0;
    DWORD room = (DWORD)(sizeof p->inbox - 1 - p->inbox_used);
    if (!ReadFile((HANDLE)p->pipe, p->inbox + p->inbox_used, available < room ? available : room, &got, NULL) || got == 0) {
      mcpp_lost(p, "its pipe closed");
      return 0;
    }
#else
    struct pollfd wait = {p->fd, POLLIN, 0};
    int ready = poll(&wait, 1, (int)left);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return 0;
    ssize_t got = recv(p->fd, p->inbox + p->inbox_used, sizeof p->inbox - 1 - p->inbox_used, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      mcpp_lost(p, got == 0 ? "it closed the connection" : strerror(errno));
      return 0;
    }
#endif
    p->inbox_used += (size_t)got;
  }
}

/*
 * -1 with p.error when the daemon would refuse token (PROTOCOL.md 2.2), by the rule of the Node and
 * Python clients (tokenProblem, _token_problem): over MCP_PROGRESS_MAX_TOKEN bytes (invalid_token
 * on every frame), or not UTF-8 (invalid_utf8: the daemon closes the connection, and the next
 * would send it again). Checked once, at open: every frame carries it.
 */
static int mcpp_token_problem(mcp_progress *p, const char *token) {
  static const char rule[] = "a token is 1 to 1024 bytes of UTF-8";
  size_t size = strlen(token);
  if (size > MCP_PROGRESS_MAX_TOKEN)
    return mcpp_fail(p, "the token is %lu bytes: %s; progress is off", (unsigned long)size, rule);
  for (const unsigned char *at = (const unsigned char *)token; *at != 0;) {
    int length = mcpp_utf8_length(at);
    if (length == 0)
      return mcpp_fail(p, "the token is not UTF-8: its byte %lu (0x%02x) starts no valid character: %s; progress is off",
                       (unsigned long)(at - (const unsigned char *)token), *at, rule);
    at += length;
  }
  return 0;
}

int mcp_progress_open(mcp_progress *p, const char *socket_path, const char *token) {
  memset(p, 0, sizeof *p);
#ifndef _WIN32
  p->fd = -1;
#endif
  p->next_seq = 1;
  p->resync_seq = -1;
  if (socket_path == NULL) socket_path = getenv("MCP_PROGRESS_SOCKET");
  if (token == NULL) token = getenv("MCP_PROGRESS_TOKEN");
  if (token == NULL || *token == 0)
    return mcpp_fail(p, "no token: set MCP_PROGRESS_TOKEN (whoever started this job knows it)");
  if (mcpp_token_problem(p, token) != 0) return -1;
  strcpy(p->token, token);
  if (socket_path == NULL || *socket_path == 0)
    return mcpp_fail(p, "no socket: set MCP_PROGRESS_SOCKET (mcp-progress run and relayProgress do)");
#ifdef _WIN32
  if (strlen(socket_path) >= sizeof p->socket_path) return mcpp_fail(p, "the pipe name %s is too long", socket_path);
#else
  if (strlen(socket_path) >= sizeof((struct sockaddr_un *)0)->sun_path)
    return mcpp_fail(p, "the socket path %s is too long", socket_path);
#endif
  strcpy(p->socket_path, socket_path);
  return mcpp_ensure(p, 1);
}

void mcp_progress_on_cancel(mcp_progress *p, mcp_progress_cancel_fn fn, void *user) {
  p->on_cancel = fn;
  p->cancel_user = user;
}

int mcp_progress_claim(mcp_progress *p) {
  int was_connected = p->connected;
  p->refused[0] = 0;
  p->claimed = 1;
  /* Not connected: connecting (now, or at a later call) sends the claim. */
  return was_connected ? mcpp_send(p, "claim", "") : mcpp_ensure(p, 0);
}

/*
 * Keeps an update as the newest, to be sent again on each new connection; `sent`: it went out on
 * this one. Not one whose progress is not above the newest's: the daemon refuses it (progress must
 * increase), so the newest it has is still the one kept. (Every update fits: its message is fitted.)
 */
static int mcpp_keep_newest(mcp_progress *p, double progress, const char *fields, int sent) {
  if (p->newest[0] != 0 && !(progress > p->newest_progress)) return 0;
  if (strlen(fields) >= sizeof p->newest) return 0;
  strcpy(p->newest, fields);
  p->newest_progress = progress;
  p->newest_sent = sent;
  return 1;
}

int mcp_progress_update(mcp_progress *p, double progress, double total, const char *message) {
  char fields[MCP_PROGRESS_MAX_FRAME - 2048];
  p->refused[0] = 0;
  /* Checked before anything is sent or kept, as the daemon checks them (as the Node and Python
   * clients' invalid_field): %.17g would write nan or inf, which is not JSON, so the daemon would
   * refuse the frame (invalid_json) and close the connection; a number out of range it refuses
   * (invalid_field); and the newest value kept would be refused again on each new connection.
   * (A comparison with NaN is false: NaN fails each.) */
  int has_total = total != MCP_PROGRESS_NO_TOTAL;
  if (!(progress >= -MCP_PROGRESS_MAX_NUMBER && progress <= MCP_PROGRESS_MAX_NUMBER))
    return mcpp_fail(p, "update ignored: progress must be a finite number within +-%.17g, got %.17g", MCP_PROGRESS_MAX_NUMBER, progress);
  if (has_total && !(total >= 0 && total <= MCP_PROGRESS_MAX_NUMBER))
    return mcpp_fail(p, "update ignored: total must be a finite number from 0 to %.17g (or MCP_PROGRESS_NO_TOTAL, -1, for none), got %.17g",
                     MCP_PROGRESS_MAX_NUMBER, total);
  int used = snprintf(fields, sizeof fields, ",\"progress\":%.17g", progress);
  if (has_total) used += snprintf(fields + used, sizeof fields - (size_t)used, ",\"total\":%.17g", total);
  if (message != NULL) {
    char fitted[MCP_PROGRESS_MAX_MESSAGE + 1];
    mcpp_fit_message(message, fitted);
    used += snprintf(fields + used, sizeof fields - (size_t)used, ",\"message\":");
    if (mcpp_json_string(fields, used, (int)sizeof fields, fitted) < 0) return mcpp_fail(p, "the message is too long");
  }
  int rejected = 0;
  if (mcpp_send(p, "progress", fields) != 0) {
    /* Not connected: the update waits for the next connection, which sends the newest first. */
    if (!p->connected && mcpp_may_reconnect(p) && mcpp_keep_newest(p, progress, fields, 0)) {
      char why[sizeof p->error];
      strcpy(why, p->error);
      mcpp_fail(p, "%s; the update is kept and sent once connected", why);
    }
    return -1;
  }
  /* Kept before reading: a refusal of it as malformed, read now, drops it. */
  mcpp_keep_newest(p, progress, fields, 1);
  mcpp_read(p, 0, -1, &rejected); /* Cancels that came meanwhile. */
  return rejected ? -1 : 0;
}

/*
 * Whether a done refused `code` was delivered all the same: sent again (`resent`) after the
 * connection it went out on was lost before its answer, a stream_closed means the stream is done
 * already, which the first one, taken before the loss, did (as the Node and Python clients count
 * it: src/client/done-answers.ts judgeDoneAnswer).
 */
static int mcpp_resent_done_landed(int resent, const char *code) {
  return resent && strcmp(code, "stream_closed") == 0;
}

/* Sends the done and waits for its answer (mcp_progress_done), leaving the connection as it is. */
static int mcpp_done(mcp_progress *p, const char *status, const char *message, int timeout_ms) {
  char fields[MCP_PROGRESS_MAX_FRAME - 2048];
  long seq = p->next_seq++;
  int used = snprintf(fields, sizeof fields, ",\"status\":");
  used = mcpp_json_string(fields, used, (int)sizeof fields, status);
  if (message != NULL && used >= 0) {
    char fitted[MCP_PROGRESS_MAX_MESSAGE + 1];
    mcpp_fit_message(message, fitted);
    used += snprintf(fields + used, sizeof fields - (size_t)used, ",\"message\":");
    used = mcpp_json_string(fields, used, (int)sizeof fields, fitted);
  }
  if (used < 0) return mcpp_fail(p, "the message is too long");
  snprintf(fields + used, sizeof fields - (size_t)used, ",\"seq\":%ld", seq);
  /* Sent again on each new connection until acked, up to the deadline: the daemon may be
   * restarting. A worker that never reached a daemon does not wait long for one. */
  long waited = p->ever_connected || timeout_ms < MCPP_NEVER_CONNECTED_GRACE_MS ? timeout_ms : MCPP_NEVER_CONNECTED_GRACE_MS;
  long deadline = mcpp_now_ms() + waited;
  int resent = 0; /* The done went out on a connection that was lost before its answer. */
  for (int first = 1;; first = 0) {
    if (mcpp_ensure(p, first) == 0) {
      if (mcpp_send(p, "done", fields) == 0) {
        int rejected = 0;
        long left = deadline - mcpp_now_ms();
        if (mcpp_read(p, left > 0 ? (int)left : 0, seq, &rejected) == 1) {
          if (!rejected) return 0;
          if (mcpp_resent_done_landed(resent, p->refused)) {
            p->refused[0] = 0; /* Not refused: the daemon has this done already. */
            return 0;
          }
          if (mcpp_refuses_frame(p->refused)) {
            char why[sizeof p->error];
            strcpy(why, p->error);
            return mcpp_fail(p, "the done was not delivered: %s", why);
          }
          if (strcmp(p->refused, "journal_failed") != 0 || mcpp_now_ms() + MCPP_JOURNAL_RETRY_MS >= deadline) return -1;
          mcpp_sleep_ms(MCPP_JOURNAL_RETRY_MS);
          continue;
        }
        if (p->connected) {
          p->refused[0] = 0; /* Not refused: an earlier update's refusal, read meanwhile, is not why. */
          return mcpp_fail(p, "the daemon did not acknowledge the done within %d ms", timeout_ms);
        }
      }
      /* Still connected, the frame could not be made (too large): sent again, it would not be. */
      if (p->connected) return -1;
      /* The done was written (or its write found the connection closed), and the connection is
       * gone before the answer: the daemon may have taken it. */
      resent = 1;
    }
    if (!mcpp_wait_for_retry(p, deadline)) break;
  }
  char why[sizeof p->error];
  strcpy(why, p->error);
  return mcpp_fail(p, "the done was not delivered within %ld ms: %s", waited, why);
}

/* Whether the daemon takes status for a done (PROTOCOL.md 2.3). */
static int mcpp_done_status(const char *status) {
  return strcmp(status, "ok") == 0 || strcmp(status, "error") == 0 || strcmp(status, "cancelled") == 0;
}

int mcp_progress_done(mcp_progress *p, const char *status, const char *message, int timeout_ms) {
  p->refused[0] = 0;
  if (p->ended) return mcpp_fail(p, "mcp_progress_done was called already: a stream ends once");
  if (status == NULL) status = "ok";
  int known = mcpp_done_status(status);
  int result = mcpp_done(p, known ? status : "error", message, timeout_ms);
  if (!known) {
    /* Shown shortened, each byte that is not UTF-8 as U+FFFD: p.error is for people. */
    char shown[MCP_PROGRESS_MAX_MESSAGE + 1], why[sizeof p->error];
    mcpp_fit_message(status, shown);
    if (strlen(shown) > 40) {
      size_t cut = 37;
      while (cut > 0 && ((unsigned char)shown[cut] & 0xc0) == 0x80) cut--; /* not inside a character */
      memcpy(shown + cut, "...", 4);
    }
    strcpy(why, p->error);
    if (result == 0)
      mcpp_fail(p, "done status must be ok, error or cancelled, got \"%s\"; the stream was ended with error instead", shown);
    else
      mcpp_fail(p, "done status must be ok, error or cancelled, got \"%s\"; ending the stream with error instead failed: %s", shown, why);
    result = -1;
  }
  /* Acked or not, the stream is over for this worker: its connection (and with it its claim)
   * ends, and nothing is sent again. */
  mcpp_disconnect(p);
  p->ended = 1;
  return result;
}

int mcp_progress_poll(mcp_progress *p, int timeout_ms) {
  long deadline = mcpp_now_ms() + timeout_ms;
  /* A refusal read, whose connection the daemon then closed: p.error says what was refused (as
   * p.refused's code does), not that a try at connecting again failed meanwhile. */
  char refusal[sizeof p->error] = "";
  p->refused[0] = 0;
  for (;;) {
    if (mcpp_ensure(p, 0) == 0) {
      int rejected = 0;
      long left = deadline - mcpp_now_ms();
      mcpp_read(p, left > 0 ? (int)left : 0, -1, &rejected);
      if (rejected && refusal[0] == 0) strcpy(refusal, p->error);
      if (p->connected) {
        if (refusal[0] != 0) strcpy(p->error, refusal);
        return 0;
      }
    }
    /* Not connected: waits for the next try at the daemon, within the timeout. */
    if (!mcpp_wait_for_retry(p, deadline)) {
      if (refusal[0] != 0) strcpy(p->error, refusal);
      return -1;
    }
  }
}

void mcp_progress_close(mcp_progress *p) {
  mcpp_disconnect(p);
  p->closed = 1;
}

#endif /* MCP_PROGRESS_IMPLEMENTATION */

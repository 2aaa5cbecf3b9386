/*
 * flush_delay.c: an LD_PRELOAD shim that makes disk flushes slower, to
 * benchmark PostgreSQL (and so navd's commit path) as if on a slower disk.
 *
 * Each wrapped call first does the real call (found with
 * dlsym(RTLD_NEXT, ...)), then sleeps NAVD_FLUSH_DELAY_US microseconds
 * (read once, at the first call; unset, empty or 0: no delay). The real
 * call's result and errno are returned unchanged.
 *
 * Wrapped: fsync, fdatasync, syncfs, and sync_file_range only when its
 * flags include SYNC_FILE_RANGE_WAIT_AFTER (a real wait for the data);
 * PostgreSQL's writeback hints (SYNC_FILE_RANGE_WRITE alone) are not
 * flushes and are not delayed.
 *
 * Not wrapped: write/pwrite to files opened with O_SYNC/O_DSYNC. On Linux
 * PostgreSQL's default wal_sync_method is fdatasync, so commits flush
 * through fdatasync; a server set to open_sync/open_datasync would not be
 * slowed by this shim.
 *
 * Only calls through the dynamic symbol are seen (not raw syscalls, nor
 * calls inside libc itself). The wrappers are thread-safe and allocate
 * nothing: the one-time setup runs under pthread_once.
 *
 * Build and use:
 *   cc -shared -fPIC -O2 -o flush_delay.so flush_delay.c -ldl
 *   LD_PRELOAD=$PWD/flush_delay.so NAVD_FLUSH_DELAY_US=1000 pg_ctl ... start
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct timespec delay; /* zero: no delay */
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_syncfs)(int);
static int (*real_sync_file_range)(int, off64_t, off64_t, unsigned int);

static void init(void)
{
    const char *s = getenv("NAVD_FLUSH_DELAY_US");
    unsigned long long us = (s && *s) ? strtoull(s, NULL, 10) : 0;
    delay.tv_sec = (time_t)(us / 1000000ULL);
    delay.tv_nsec = (long)(us % 1000000ULL) * 1000L;
    real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    real_syncfs = (int (*)(int))dlsym(RTLD_NEXT, "syncfs");
    real_sync_file_range = (int (*)(int, off64_t, off64_t, unsigned int))
        dlsym(RTLD_NEXT, "sync_file_range");
}

/* Sleeps the whole delay (resuming after signals), keeping errno. */
static void pause_after_flush(void)
{
    if (delay.tv_sec == 0 && delay.tv_nsec == 0)
        return;
    int saved = errno;
    struct timespec left = delay;
    while (nanosleep(&left, &left) == -1 && errno == EINTR)
        ;
    errno = saved;
}

#define NOT_FOUND() (errno = ENOSYS, -1)

int fsync(int fd)
{
    pthread_once(&once, init);
    if (!real_fsync)
        return NOT_FOUND();
    int r = real_fsync(fd);
    pause_after_flush();
    return r;
}

int fdatasync(int fd)
{
    pthread_once(&once, init);
    if (!real_fdatasync)
        return NOT_FOUND();
    int r = real_fdatasync(fd);
    pause_after_flush();
    return r;
}

int syncfs(int fd)
{
    pthread_once(&once, init);
    if (!real_syncfs)
        return NOT_FOUND();
    int r = real_syncfs(fd);
    pause_after_flush();
    return r;
}

int sync_file_range(int fd, off64_t offset, off64_t nbytes, unsigned int flags)
{
    pthread_once(&once, init);
    if (!real_sync_file_range)
        return NOT_FOUND();
    int r = real_sync_file_range(fd, offset, nbytes, flags);
    if (flags & SYNC_FILE_RANGE_WAIT_AFTER)
        pause_after_flush();
    return r;
}

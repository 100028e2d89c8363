/*
 * The cheapest server redis-benchmark can drive: one epoll loop, as Redis's,
 * that reads what a connection sent and answers "+OK\r\n" to every request
 * in it, with one read and one write per batch, as Redis and coordis make.
 * It parses nothing beyond counting requests (a '*' that starts a line) and
 * keeps no data, so the CPU it spends per request is the kernel's TCP path
 * and the event loop: the floor under any server's figure.
 * Used by scripts/cpu-floor.sh; not a Redis server.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_FD 65536
#define READ_SIZE (16 * 1024)

/* Per connection: whether the next byte starts a line. */
static unsigned char at_line_start[MAX_FD];
static char reply[READ_SIZE * 5];

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: floor PORT\n");
        return 2;
    }
    int one = 1;
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)atoi(argv[1]));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(listener, 511) != 0) {
        perror("floor: bind");
        return 1;
    }
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = listener};
    epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev);
    static char buf[READ_SIZE];
    struct epoll_event events[128];
    for (;;) {
        int ready = epoll_wait(ep, events, 128, -1);
        for (int i = 0; i < ready; i++) {
            int fd = events[i].data.fd;
            if (fd == listener) {
                int conn = accept(listener, NULL, NULL);
                if (conn < 0 || conn >= MAX_FD) {
                    if (conn >= 0) close(conn);
                    continue;
                }
                fcntl(conn, F_SETFL, O_NONBLOCK);
                setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                at_line_start[conn] = 1;
                struct epoll_event cev = {.events = EPOLLIN, .data.fd = conn};
                epoll_ctl(ep, EPOLL_CTL_ADD, conn, &cev);
                continue;
            }
            ssize_t n = read(fd, buf, sizeof buf);
            if (n < 0 && errno == EAGAIN) continue;
            if (n <= 0) {
                close(fd);
                continue;
            }
            size_t len = 0;
            unsigned char start = at_line_start[fd];
            for (ssize_t k = 0; k < n; k++) {
                if (start && buf[k] == '*') {
                    memcpy(reply + len, "+OK\r\n", 5);
                    len += 5;
                }
                start = buf[k] == '\n';
            }
            at_line_start[fd] = start;
            if (len > 0 && write(fd, reply, len) < 0) close(fd);
        }
    }
}

/* openclose COUNT: open and close a regular file in /tmp; us per pair. */
#include <fcntl.h>
#include <unistd.h>

#include "bench.h"

int main(int argc, char **argv)
{
    long n = bench_count(argc, argv);
    char path[] = "/tmp/bench-openclose-XXXXXX";
    int fd = mkstemp(path);

    if (fd < 0 || close(fd))
        bench_fail("openclose: cannot create %s", path);
    double t0 = bench_now();
    for (long i = 0; i < n; i++) {
        fd = open(path, O_RDONLY);
        if (fd < 0 || close(fd))
            bench_fail("openclose: iteration %ld: open or close of %s failed", i, path);
    }
    double t1 = bench_now();
    unlink(path);
    bench_result("openclose", (t1 - t0) / n, "us");
    return 0;
}

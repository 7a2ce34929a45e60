/*
 * Runs a fuzz target over files without libFuzzer, with any C compiler, on
 * any CPU: each input once, every property the target checks checked, the
 * first failure an abort naming its input. Built with the target and
 * -DORIBI_FUZZ_DUMP it prints a line per input, its name and what it
 * parsed to, so that two builds (x86-64 with its SIMD paths, aarch64 with
 * NEON and the portable one) can be compared on one corpus: .ci/arm64
 * diffs them.
 *
 *   replay FILE|DIR...     (a directory's files in name order)
 */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *current = "";

static void on_abort(int sig)
{
    static const char msg[] = "replay: a check failed on input ";
    (void)sig;
    if (write(2, msg, sizeof(msg) - 1) < 0 || write(2, current, strlen(current)) < 0 || write(2, "\n", 1) < 0)
        _exit(134);
    _exit(134);
}

static int one(const char *path, const char *name)
{
    FILE *f = fopen(path, "rb");
    uint8_t *data = NULL;
    size_t size = 0, cap = 0, n;
    if (!f) {
        perror(path);
        return -1;
    }
    do {
        if (size == cap) {
            uint8_t *grown = realloc(data, cap = cap ? cap * 2 : 4096);
            if (!grown) {
                fprintf(stderr, "replay: %s: out of memory\n", path);
                exit(1);
            }
            data = grown;
        }
        n = fread(data + size, 1, cap - size, f);
        size += n;
    } while (n > 0);
    fclose(f);
    current = path;
    printf("%s", name);
    LLVMFuzzerTestOneInput(data, size);
    printf("\n");
    free(data);
    return 0;
}

static int regular(const struct dirent *e)
{
    return e->d_name[0] != '.';
}

int main(int argc, char **argv)
{
    int status = 0;
    signal(SIGABRT, on_abort);
    for (int i = 1; i < argc; i++) {
        struct dirent **names;
        int n = scandir(argv[i], &names, regular, alphasort);
        if (n < 0) {
            status |= one(argv[i], argv[i]) < 0;
            continue;
        }
        for (int k = 0; k < n; k++) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", argv[i], names[k]->d_name);
            status |= one(path, names[k]->d_name) < 0;
            free(names[k]);
        }
        free(names);
    }
    return status;
}

/* Logit oracle: llama.cpp (libllama) evaluates given token ids and reports what it computes.
 *
 * usage: llama_cpp_logits MODEL.gguf IDS.txt OUT.f32 THREADS N_GEN KV
 *   IDS.txt  whitespace-separated token ids (the prompt, already tokenized by the caller so
 *            both engines see exactly the same ids)
 *   OUT.f32  written with n_ids * n_vocab little-endian f32: the logits of every position,
 *            evaluated in one batch from an empty cache
 *   N_GEN    then greedily decode up to this many tokens (argmax, stop at end-of-generation)
 *   KV       "default": llama.cpp's own context defaults (f16 KV cache, flash attention auto),
 *            what its users get; "f32": f32 KV cache and no flash attention, so only the
 *            weight and activation quantization of the matmuls remains as a source of error
 * stdout: one JSON object {"n_vocab", "n_ids", "generated": [ids], "text": "..."}.
 *
 * A C program rather than Python ctypes: llama.h's parameter structs change between versions,
 * and the compiler reads the real header instead of a hand-copied layout. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static int fail(const char *what, const char *detail) {
    fprintf(stderr, "llama_cpp_logits: %s: %s\n", what, detail);
    return 1;
}

/* Reads at most `cap` ids; returns the count, or -1 on a malformed or out-of-range id. */
static int read_ids(const char *path, llama_token *ids, int cap, int n_vocab) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0;
    long v;
    while (fscanf(f, "%ld", &v) == 1) {
        if (n >= cap || v < 0 || v >= n_vocab) {
            fprintf(stderr, "llama_cpp_logits: id %ld at index %d (vocab %d, cap %d)\n", v, n, n_vocab, cap);
            fclose(f);
            return -1;
        }
        ids[n++] = (llama_token)v;
    }
    int bad = !feof(f);
    fclose(f);
    return bad ? -1 : n;
}

/* Writes `s` as a JSON string body. */
static void json_escape(const char *s, int len) {
    for (int i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c == '\n') printf("\\n");
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
}

static int argmax(const float *row, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (row[i] > row[best]) best = i;
    return best;
}

/* Whether /proc/cpuinfo lists AMX (amx_int8). */
static int cpu_has_amx(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, " amx_int8") != NULL;
    fclose(f);
    return found;
}

int main(int argc, char **argv) {
    if (argc != 7) return fail("usage", "MODEL IDS.txt OUT.f32 THREADS N_GEN default|f32");
    const char *model_path = argv[1], *ids_path = argv[2], *out_path = argv[3];
    int threads = atoi(argv[4]), n_gen = atoi(argv[5]);
    if (threads < 1 || threads > 256) return fail("THREADS must be 1..256", argv[4]);
    if (n_gen < 0 || n_gen > 4096) return fail("N_GEN must be 0..4096", argv[5]);
    int f32_kv = strcmp(argv[6], "f32") == 0;
    if (!f32_kv && strcmp(argv[6], "default") != 0) return fail("KV must be default or f32", argv[6]);

    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    // llama.cpp's AMX weight repacking crashes in this sandbox on AMX CPUs (SIGSEGV in
    // ggml_backend_amx_mul_mat); there it runs on its plain CPU buffers.
    if (cpu_has_amx()) mp.use_extra_bufts = false;
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) return fail("cannot load model", model_path);
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int n_vocab = llama_vocab_n_tokens(vocab);

    enum { MAX_IDS = 8192 };
    llama_token *ids = malloc(sizeof(llama_token) * (MAX_IDS + (size_t)n_gen));
    if (!ids) return fail("out of memory", "ids");
    int n_ids = read_ids(ids_path, ids, MAX_IDS, n_vocab);
    if (n_ids <= 0) return fail("no valid token ids in", ids_path);

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n_ids + n_gen + 16);
    cp.n_batch = (uint32_t)n_ids;
    cp.n_ubatch = (uint32_t)n_ids;
    cp.n_seq_max = 1;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    cp.no_perf = true;
    if (f32_kv) {
        cp.type_k = GGML_TYPE_F32;
        cp.type_v = GGML_TYPE_F32;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    }
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) return fail("cannot create context for", model_path);

    /* Every position asks for its logits. */
    struct llama_batch batch = llama_batch_init(n_ids, 0, 1);
    for (int i = 0; i < n_ids; i++) {
        batch.token[i] = ids[i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = n_ids;
    if (llama_decode(ctx, batch) != 0) return fail("llama_decode failed on the prompt", ids_path);

    FILE *out = fopen(out_path, "wb");
    if (!out) return fail("cannot write", strerror(errno));
    for (int i = 0; i < n_ids; i++) {
        const float *row = llama_get_logits_ith(ctx, i);
        if (!row) return fail("no logits for a prompt position", ids_path);
        if (fwrite(row, sizeof(float), (size_t)n_vocab, out) != (size_t)n_vocab)
            return fail("short write", out_path);
    }
    fclose(out);

    /* Greedy continuation: one token per decode call, as a chat front end would. */
    int n_out = 0;
    llama_token next = argmax(llama_get_logits_ith(ctx, n_ids - 1), n_vocab);
    llama_token *gen = ids + n_ids;
    while (n_out < n_gen) {
        gen[n_out++] = next;
        if (llama_vocab_is_eog(vocab, next)) break;
        struct llama_batch one = llama_batch_get_one(&gen[n_out - 1], 1);
        if (llama_decode(ctx, one) != 0) return fail("llama_decode failed while generating", model_path);
        next = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
    }

    printf("{\"n_vocab\": %d, \"n_ids\": %d, \"generated\": [", n_vocab, n_ids);
    for (int i = 0; i < n_out; i++) printf("%s%d", i ? ", " : "", gen[i]);
    printf("], \"text\": \"");
    for (int i = 0; i < n_out; i++) {
        char piece[256];
        int len = llama_token_to_piece(vocab, gen[i], piece, sizeof piece, 0, true);
        if (len > 0) json_escape(piece, len);
    }
    printf("\"}\n");

    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    free(ids);
    return 0;
}

#!/usr/bin/env python3
"""PyTorch reference timings for benches/gpu.rs: encoder passes of
all-MiniLM-L6-v2's shape and roberta-large's, random weights, 30 tokens,
batch 1 and 32, every hidden state computed and the last one copied to the
host; on the GPU (CUDA, f32 with PyTorch's defaults, and f16) and on the CPU
(all cores). Needs no download: the models are built from their configs.

    python3 scripts/bench_gpu_torch.py
    BLINDSPOT_CPU_THREADS=1,2,4,8,16 python3 scripts/bench_gpu_torch.py

With BLINDSPOT_CPU_THREADS (as benches/gpu.rs reads it) only the CPU runs:
both shapes at batch 32 with torch.set_num_threads at each count.
"""
import os
import statistics
import time

import torch
import transformers as tf

TOKENS = 30
SHAPES = {
    "minilm": tf.BertConfig(
        hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
        intermediate_size=1536, vocab_size=30522, max_position_embeddings=512),
    "roberta_large": tf.RobertaConfig(
        hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
        intermediate_size=4096, vocab_size=50265, max_position_embeddings=514,
        type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1),
}


def ids(name, batch):
    """The same ids as benches/gpu.rs: start, deterministic ids, end."""
    start, end = (0, 2) if name == "roberta_large" else (101, 102)
    return torch.tensor([[start] + [1000 + (s * 7919 + i * 104729) % 20000
                                    for i in range(1, TOKENS - 1)] + [end]
                         for s in range(batch)])


def median_ms(model, inputs, sync, repeats):
    def once():
        out = model(input_ids=inputs, output_hidden_states=True)
        out.hidden_states[-1].float().cpu()
        sync()
    for _ in range(5):
        once()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        once()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def thread_sweep(counts):
    """Batch 32 on the CPU at each thread count (benches/gpu.rs's cpu_threads rows)."""
    print(f"torch {torch.__version__}, transformers {tf.__version__}, {os.cpu_count()} CPUs")
    for name, config in SHAPES.items():
        config.attn_implementation = "sdpa"
        model = (tf.BertModel if name == "minilm" else tf.RobertaModel)(config).eval()
        for threads in counts:
            torch.set_num_threads(threads)
            with torch.inference_mode():
                t = median_ms(model, ids(name, 32), lambda: None, 10)
            print(f"torch {name} cpu_f32 threads {threads} batch 32: median {t:.2f} ms")


def main():
    torch.manual_seed(0)
    counts = os.environ.get("BLINDSPOT_CPU_THREADS")
    if counts:
        thread_sweep([int(n) for n in counts.split(",")])
        return
    torch.set_num_threads(os.cpu_count())
    cuda = torch.cuda.is_available()
    print(f"torch {torch.__version__}, transformers {tf.__version__}, "
          f"{torch.get_num_threads()} CPU threads, "
          f"GPU: {torch.cuda.get_device_name() if cuda else 'none'}, "
          f"tf32 matmul: {torch.backends.cuda.matmul.allow_tf32}")
    for name, config in SHAPES.items():
        config.attn_implementation = "sdpa"
        model = (tf.BertModel if name == "minilm" else tf.RobertaModel)(config).eval()
        runs = [("cpu_f32", "cpu", lambda: None, 10)]
        if cuda:
            runs += [("cuda_f32", "cuda", torch.cuda.synchronize, 50),
                     ("cuda_f16", "cuda", torch.cuda.synchronize, 50)]
        for label, device, sync, repeats in runs:
            model = model.to(device)
            if label == "cuda_f16":
                model = model.half()
            for batch in (1, 32):
                with torch.inference_mode():
                    t = median_ms(model, ids(name, batch).to(device), sync, repeats)
                print(f"torch {name} {label} batch {batch}: median {t:.2f} ms")


if __name__ == "__main__":
    main()

"""inferx-generate MODEL.ixa --prompt TEXT [--max-new-tokens N] [--temperature T --top-k K --top-p P --seed S]

Streams the generated text to stdout as tokens come; at the end prints, on stderr, the time to
the first token and the decode rate (tokens/s). `--chat` wraps the prompt in the model's chat
template (a user message).
"""

from __future__ import annotations

import sys

import click

from inferx_compiler.cli.common import CONTEXT_SETTINGS, click_main, completion_epilog, existing_file, options_namespace, run_cli

EXAMPLES = """\b
Examples:
  inferx-generate smollm2.ixa --prompt "The capital of France is" --max-new-tokens 32
  inferx-generate smollm2.ixa --prompt "Write a haiku" --chat --temperature 0.7 --top-p 0.9 --seed 1
  inferx-generate smollm2.ixa --prompt "Hello" --ids          token ids, one line, instead of text
"""


@click.command("inferx-generate", context_settings=CONTEXT_SETTINGS,
               epilog=EXAMPLES + "\n" + completion_epilog("inferx-generate"))
@click.argument("artifact", callback=existing_file)
@click.option("--prompt", required=True, help="the prompt text")
@click.option("--max-new-tokens", type=click.IntRange(min=1), default=64, show_default=True)
@click.option("--temperature", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="0: greedy (argmax)")
@click.option("--top-k", type=click.IntRange(min=0), default=0, show_default=True, help="0: off")
@click.option("--top-p", type=click.FloatRange(min=0, max=1, min_open=True), default=1.0, show_default=True,
              help="1: off")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--chat", is_flag=True, help="format the prompt with the model's chat template")
@click.option("--ids", "as_ids", is_flag=True, help="print the new token ids instead of text")
@click.option("--weights", "weights_dir", default=None, metavar="DIR",
              help="the model folder whose safetensors files an artifact built with --weights reference reads")
@click.option("--device", default=None, help="cpu or cuda[:N] (default: the artifact's target kind)")
@click.option("--debug", is_flag=True, help="show tracebacks")
def command(**params) -> int:
    """Generate text with a generation artifact (an LLM built from a Hugging Face folder or GGUF)."""
    args = options_namespace(params)
    return run_cli(lambda: _work(args), args.debug)


def main(argv: list[str] | None = None) -> int:
    return click_main(command, argv)


def _work(args) -> int:
    from inferx_compiler.errors import InputValidationError
    from inferx_compiler.runtime.generation import GenerationSession

    session = GenerationSession(args.artifact, device=args.device, weights=args.weights_dir)
    prompt = args.prompt
    if args.chat:
        prompt = session.chat_prompt([{"role": "user", "content": args.prompt}])
    stream = session.generate(prompt, args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
                              top_p=args.top_p, seed=args.seed)
    if args.as_ids:
        for _ in stream:
            pass
        print(" ".join(map(str, session.last_token_ids)))
    else:
        for piece in stream:
            sys.stdout.write(piece)
            sys.stdout.flush()
        sys.stdout.write("\n")
    stats = session.last_stats
    if stats.new_tokens == 0:
        raise InputValidationError("no token was generated")
    print(f"prompt {stats.prompt_tokens} tokens, {stats.new_tokens} new; time to first token "
          f"{stats.time_to_first_token_s * 1e3:.1f} ms, decode {stats.tokens_per_s:.1f} tokens/s",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

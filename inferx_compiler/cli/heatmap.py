"""inferx-heatmap SCRAPE_OR_BENCH_JSON -o heatmap.png [--model NAME] [--quantile 0.95] [--title TEXT]

Draws the P95 (or another quantile) latency per model version and input-length bin, from a
Prometheus scrape of inferx-serve's /metrics (histogram `inference_latency_seconds`) or from a
benchmark JSON, and prints the same table as text.
"""

from __future__ import annotations

import sys

import click

from inferx_compiler.cli.common import CONTEXT_SETTINGS, click_main, completion_epilog, existing_file, run_with_options
HELP = """Draw a latency heatmap: the P95 (--quantile) per model version (rows) and input-length bin
(columns: tiny 1-128, small 129-512, large 513-2048, xlarge >2048 elements along the sequence
dim), with each cell annotated in ms and empty cells shown as n/a; the same table is printed.

SCRAPE_OR_BENCH_JSON is either a Prometheus text scrape of inferx-serve's /metrics (the
quantile of the inference_latency_seconds histogram, interpolated within its buckets as
Prometheus' histogram_quantile does, summed over the other labels unless --model picks one)
or a benchmark JSON {"requests": [{"model_version": "1", "input_length": 300,
"latency_s": 0.0123}, ...]} (exact quantile; "input_length_bin" may replace "input_length").
'-' reads standard input.
"""

EXAMPLES = """\b
Examples:
  curl -s localhost:8000/metrics > scrape.txt
  inferx-heatmap scrape.txt -o heatmap.png                   P95 over all models
  inferx-heatmap scrape.txt -o heatmap.png --model bert      one model's series only
  inferx-heatmap bench.json -o p99.png --quantile 0.99 --title "P99 before the tuning"
  inferx-heatmap scrape.txt -o ttft.png --metric generation_time_to_first_token_seconds
"""


@click.command("inferx-heatmap", context_settings=CONTEXT_SETTINGS, help=HELP,
               epilog=EXAMPLES + "\n" + completion_epilog("inferx-heatmap"))
@click.argument("source", metavar="SCRAPE_OR_BENCH_JSON", callback=existing_file)
@click.option("-o", "--output", required=True, metavar="PNG", help="image to write (PNG)")
@click.option("--model", metavar="NAME", help="only this model's series / requests (default: all, summed)")
@click.option("--quantile", type=click.FloatRange(0, 1), default=0.95, show_default=True,
              help="the quantile to show, in [0, 1]")
@click.option("--metric", default="inference_latency_seconds", show_default=True,
              type=click.Choice(("inference_latency_seconds", "generation_time_to_first_token_seconds",
                                 "generation_time_per_output_token_seconds", "generation_e2e_latency_seconds")),
              help="the scrape's histogram to draw (the generation_* ones: inferx-serve --model)")
@click.option("--title", metavar="TEXT", help="title of the chart (default names the quantile and the model)")
@click.option("--debug", is_flag=True, help="show tracebacks")
def command(**params) -> int:
    return run_with_options(params, _work)


def main(argv: list[str] | None = None) -> int:
    return click_main(command, argv)


def _work(args) -> int:
    from inferx_compiler.runtime.heatmap import draw_heatmap, format_table, load_table, read_source

    table = load_table(read_source(args.source), model=args.model, quantile=args.quantile, metric=args.metric)
    print(format_table(table, args.title))
    draw_heatmap(table, args.output, args.title)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

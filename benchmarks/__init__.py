"""Throughput benchmarks of official_seg and of the Model Garden trainer."""

"""Dataset tooling: conversion, colour masks, statistics, synthetic sets, subsets."""

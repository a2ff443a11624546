"""Tests of kubesim, driven through the official kubernetes client over HTTP."""

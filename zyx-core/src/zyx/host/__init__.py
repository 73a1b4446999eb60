"""The host backend: numpy-backed memory and kernels compiled to C (or interpreted)."""

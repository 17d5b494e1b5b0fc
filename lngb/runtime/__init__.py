"""The runtime: value-exact cache keys and the byte-bounded caches, recording and replaying
kernels, the count-form memo, and the multi-core schedule (plan, replay on threads)."""

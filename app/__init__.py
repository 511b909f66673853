from app.core.torch_addons import hide_mismatched_torch_addons

# Before anything imports transformers (app/core/torch_addons.py says why).
hide_mismatched_torch_addons()

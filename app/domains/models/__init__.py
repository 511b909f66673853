"""The served models, their queue and load as the API shows them."""

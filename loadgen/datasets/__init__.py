"""Datasets: turn --dataset-name and its flags into the prompts to send.

One module per dataset; ``registry`` names each with its loader, sampler and traits, and
``sample.sample_dataset`` builds the one the flags ask for.
"""

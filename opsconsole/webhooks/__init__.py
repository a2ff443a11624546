"""The admission webhook server (`manage.py runwebhooks`): TLS certificates, the aiohttp application that answers
AdmissionReviews with `reconcilers.engine.admission`, and the recorder that puts every decision on the action
record."""

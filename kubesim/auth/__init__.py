"""Who is asking and what they may do: authentication by bearer token (the admin token, a static token file as
kube-apiserver's `--token-auth-file`, ServiceAccount tokens issued by `TokenRequest`), the request's attributes as
kube-apiserver's RequestInfo derives them, and the RBAC authorizer with escalation prevention."""

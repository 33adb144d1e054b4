"""botocore's bundled data, with its endpoint table cut to the services Strata's S3 clients can call.

Why: a botocore session parses ``endpoints.json`` whole when it makes its first client: every AWS service
in every partition, megabytes of Python objects, which the session then keeps. An S3 client looks up one
service in it. Cutting the table takes a sizeable part off the resident memory of an aiobotocore S3 client
after its first requests, and every agent and worker holds one (docs/benchmarks.md, the HTTP overload
benchmark on S3).

How: botocore's documented extension point, a session's ``data_loader`` component, with a ``Loader`` whose
file loader (botocore's own JSON loader) drops the other services from each partition as the file is
read. Partition metadata (regions, DNS suffixes, defaults) stays whole. Besides S3, the table keeps the
services botocore's credential providers call through the same session (STS for assumed roles and web
identity, SSO), so credentials from a profile resolve as they did. Everything else botocore loads (the
S3 model, the endpoint rule set, partitions.json) is untouched.
"""

from __future__ import annotations

import os
from typing import Any

from botocore.loaders import JSONFileLoader, Loader

# The services an S3 client's session can make clients for: S3 itself and the credential providers'.
SERVICES = frozenset({"s3", "sts", "sso", "sso-oidc"})


class _EndpointsCutLoader(JSONFileLoader):
    def load_file(self, file_path: str) -> Any:
        data = super().load_file(file_path)
        if data is not None and os.path.basename(file_path) == "endpoints":
            for partition in data.get("partitions", ()):
                services = partition.get("services")
                if isinstance(services, dict):
                    for name in [name for name in services if name not in SERVICES]:
                        del services[name]
        return data


def data_loader() -> Loader:
    """A loader to register as a session's ``data_loader`` before it makes a client."""
    return Loader(file_loader=_EndpointsCutLoader())

"""Selecting netprobe in OSWorld's DesktopEnv.

desktop_env 1.0.2's ``DesktopEnv`` builds its manager and provider with
``create_vm_manager_and_provider(provider_name, region, use_proxy)`` (imported into
``desktop_env.desktop_env``) and accepts only its own provider names. `install_factory`
replaces that factory so that the provider name it is given (default ``"docker"``: a provider
whose environment starts clean, as a provisioned or restored slot does) builds netprobe's
manager and provider; every other name goes to the original factory.
"""

import sys

from .manager import NetprobeVMManager
from .provider import NetprobeProvider


def install_factory(name="docker", **provider_kwargs):
    """Routes ``provider_name == name`` to netprobe. ``provider_kwargs`` go to
    `NetprobeProvider` (``netprobe``, ``profile``, ``publish``, ``provision_args``) and
    ``state_dir`` to `NetprobeVMManager`. Returns the original factory.
    """
    import desktop_env.providers as providers

    state_dir = provider_kwargs.pop("state_dir", None)
    original = getattr(providers.create_vm_manager_and_provider, "__wrapped__",
                       providers.create_vm_manager_and_provider)

    def factory(provider_name, region, use_proxy=False):
        if provider_name.lower().strip() == name:
            return NetprobeVMManager(state_dir), NetprobeProvider(region, **provider_kwargs)
        return original(provider_name, region, use_proxy=use_proxy)

    factory.__wrapped__ = original
    providers.create_vm_manager_and_provider = factory
    de = sys.modules.get("desktop_env.desktop_env")
    if de is not None:
        de.create_vm_manager_and_provider = factory
    return original

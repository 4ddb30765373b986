"""What may run without asking, and where it runs.

The approval matrix and read-scope rules (`policy`), the runner of normal turns
(`runner`), the gate plugins' say within fixed limits (`plugin_gate`), the shell proof's
scope (`shell_scope`, `git_scope`) and the jail's configuration (`confine`, `binds`).
Imports no `agent`, `followup`, `ui` or `acp`: the loop and the speculative gate ask it.
"""

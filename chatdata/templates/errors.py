"""Exceptions of the chat-template engine."""


class TemplateError(ValueError):
    """A chat template could not be rendered (``raise_exception`` in the template, a jinja
    error, or inputs the template cannot handle).

    Example:
        >>> from chatdata.templates import render_chats, TemplateError
        >>> try:
        ...     render_chats([[{"role": "user", "content": "hi"}]], "{{ raise_exception('no') }}")
        ... except TemplateError as err:
        ...     print(err)
        no
    """


class UnplaceableTurnError(TemplateError):
    """An assistant turn holds something to learn, but the mask engine cannot find it in the
    rendered chat. The message names the template, the chat and the message.

    Example:
        >>> issubclass(UnplaceableTurnError, TemplateError)
        True
    """

/// The first element `stream` yields within `limit`; nil when the stream ends first or the time passes (the reading
/// task is then cancelled, which ends the stream's wait).
package func firstElement<Element: Sendable>(
    of stream: AsyncStream<Element>, within limit: Duration
) async -> Element? {
    let reader = Task {
        var iterator = stream.makeAsyncIterator()
        return await iterator.next()
    }
    let timer = Task {
        try? await Task.sleep(for: limit)
        reader.cancel()
    }
    defer { timer.cancel() }
    return await reader.value
}

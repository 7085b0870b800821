import CSocket

/// Names the calling thread for the kernel (`ps -L`, `top -H`, `/proc/<pid>/task/<tid>/comm`, debuggers).
///
/// Called first thing inside the thread's body. Foundation's `Thread.name` set before `start()` never reaches the
/// kernel, and set from inside the thread it can be lost when the parent has not yet stored the thread's handle
/// (swift-corelibs-foundation: a test that counted named lane threads failed about one run in ten). The kernel keeps
/// 15 bytes; a longer name is cut there.
package func nameCurrentThread(_ name: String) {
    let bytes = Array(name.utf8.prefix(15)) + [0]
    bytes.withUnsafeBufferPointer { buffer in
        buffer.withMemoryRebound(to: CChar.self) { _ = la_name_current_thread($0.baseAddress!) }
    }
}

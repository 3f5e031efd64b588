"""A stand-in Redis server for clock tests: answers PING with +PONG and TIME with this host's
time plus an offset in seconds, read from OFFSET_FILE at every TIME (a test moves it while the
server runs), and appends a byte to OFFSET_FILE.count for each TIME it answers; anything else
gets +OK. Writes its port to PORT_FILE once it listens.

Usage: redis_clock.py OFFSET_FILE PORT_FILE
"""
import os
import socket
import sys
import threading
import time


def commands(buffer):
    """Yields (command, rest) for each whole RESP array of bulk strings at the start of buffer."""
    while buffer.startswith(b"*") and b"\r\n" in buffer:
        header, rest = buffer.split(b"\r\n", 1)
        parts = []
        for _ in range(int(header[1:])):
            if b"\r\n" not in rest:
                return
            length_line, rest = rest.split(b"\r\n", 1)
            length = int(length_line[1:])
            if len(rest) < length + 2:
                return
            parts.append(rest[:length])
            rest = rest[length + 2:]
        yield parts, rest
        buffer = rest


def serve(connection, offset_file):
    buffer = b""
    with connection:
        while True:
            data = connection.recv(4096)
            if not data:
                return
            buffer += data
            for parts, rest in commands(buffer):
                buffer = rest
                name = parts[0].upper() if parts else b""
                if name == b"PING":
                    connection.sendall(b"+PONG\r\n")
                elif name == b"TIME":
                    with open(offset_file) as f:
                        offset = float(f.read().strip() or "0")
                    now = time.time() + offset
                    seconds = str(int(now)).encode()
                    micros = str(int((now - int(now)) * 1_000_000)).encode()
                    connection.sendall(b"*2\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(seconds), seconds, len(micros), micros))
                    with open(offset_file + ".count", "ab") as f:
                        f.write(b".")
                else:
                    connection.sendall(b"+OK\r\n")


def main():
    offset_file, port_file = sys.argv[1], sys.argv[2]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(listener.getsockname()[1]))
    os.rename(port_file + ".tmp", port_file)
    while True:
        connection, _ = listener.accept()
        threading.Thread(target=serve, args=(connection, offset_file), daemon=True).start()


if __name__ == "__main__":
    main()

// AGFormats

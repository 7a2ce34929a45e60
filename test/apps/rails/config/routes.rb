# frozen_string_literal: true

Rails.application.routes.draw do
  get "/hello", to: "hello#show"
  get "/upstream", to: "hello#upstream"
  post "/echo", to: "hello#echo"
  get "/live", to: "live#events"
  get "/nap", to: "hello#nap"
  post "/upload", to: "files#upload"
  get "/download", to: "files#download"
  get "/boom", to: "hello#boom"
  get "/version", to: "hello#version"
end

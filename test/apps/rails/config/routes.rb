# frozen_string_literal: true

Rails.application.routes.draw do
  get "/hello", to: "hello#show"
  post "/echo", to: "hello#echo"
  get "/live", to: "live#events"
end
